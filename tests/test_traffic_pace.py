"""The provider's budget (SPEC §14, issue 26) as users run it: one pace for the run, on by default.

The official `openai` client against the loopback provider answering 429s — one pace for the whole
run (a 429's cool-down shared by every thread, the rate the provider announces kept), on with no
option at all; a spent quota not retried; a case judged on what the agent got when its own retry
succeeded; the written budget stamped with Redis's clock.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from openai_server import ChatServer
from test_traffic import busiest_second, point_at, redis_url  # noqa: F401 (a fixture)

from pytest_agent_eval.traffic.pace import announced
from pytest_agent_eval.traffic.store import RedisStore, reserve_state, send_state, update_state

pytest.importorskip("openai")

AGENTS = """
import httpx
import openai


def no_retries(query):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model="loopback-model", messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content


def sdk_retries(query):
    client = openai.OpenAI()  # its default: 2 retries
    reply = client.chat.completions.create(model="loopback-model", messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content


def own_retries(query):
    import os

    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    body = {"model": "loopback-model", "messages": [{"role": "user", "content": query}]}
    with httpx.Client() as client:
        for _ in range(3):  # the agent's own retry loop, after the hook's
            reply = client.post(url, json=body)
            if reply.status_code == 200:
                return reply.json()["choices"][0]["message"]["content"]
    return f"gave up: {reply.status_code}"
"""

RUN = ("-p", "no:cacheprovider", "-p", "no:randomly")


def evals(agent: str, cases: int) -> str:
    lines = [f"agent: pace_agents:{agent}", "cases:"]
    for n in range(cases):
        lines += [
            f"  - id: case_{n}",
            f"    input: Question {n}",
            "    expect:",
            "      contains: [without tools]",
        ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(pace_agents=AGENTS)
    pytester.makeini("[pytest]\n")
    pytester.syspathinsert()
    return pytester


def test_a_429s_cool_down_holds_back_every_thread_with_no_option(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 asking for 1 s, and 429s to anything within it: six cases all pass, one 429 in all.

    The six cases run at concurrency 6 and their client does not retry; the provider answers one
    429 in all.
    """
    project.makefile(".yaml", eval_cool=evals("no_retries", 6))
    with ChatServer(lambda prompt: None, failures=1, retry_after="1", retry_after_ms=1000) as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-concurrency", "6")
    result.assert_outcomes(passed=6)
    assert chat.limited == 1


def test_the_rate_the_provider_announces_is_kept(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider of 5 requests/s announcing it in `x-ratelimit-*` headers: 20 cases pass, few 429s.

    The 20 cases run at concurrency 20 with no option, and pass with few requests answered 429
    (without the pace most cases fail on one). Not none: each answer's rate is read as used / time
    to full, and `remaining` is rounded down while the time is not (a level of 3.6 of 5 reads as
    7/s); under load the next requests can overrun the bucket a few times before the cool-down holds
    them.
    """
    project.makefile(".yaml", eval_rate=evals("no_retries", 20))
    with ChatServer(lambda prompt: None, rate=5) as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-concurrency", "20")
    result.assert_outcomes(passed=20)
    assert chat.limited <= 4


def test_a_provider_that_announces_no_rate_is_paced_by_its_429s(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider of 5 requests/s sending only bare 429s beyond it: 20 cases pass, fewer 429s.

    20 cases at concurrency 20 whose client does not retry and no option all pass; each 429 slows
    the run's pace (AIMD), so fewer requests are answered 429 than there are cases.
    """
    project.makefile(".yaml", eval_bare=evals("no_retries", 20))
    with ChatServer(lambda prompt: None, rate=5, announce=False, retry_after=None) as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-concurrency", "20")
    result.assert_outcomes(passed=20)


def test_a_burst_of_429s_halves_the_pace_once() -> None:
    """Twenty requests sent together all answered 429: the pace halves once, not twenty times.

    2^20 times slower was a run that stood still; a 429 to a request sent after that halving halves
    it again.
    """
    state: dict[str, float] = {"gap:api": 0.01}
    update_state(state, 100.0, [("slower", "step:api", 0.05)] * 20)
    assert state["step:api"] == pytest.approx(0.02)
    update_state(
        state, 100.5, [("slower", "step:api", 0.6)]
    )  # sent before the halving at 100.0: old news
    assert state["step:api"] == pytest.approx(0.02)
    update_state(
        state, 100.5, [("slower", "step:api", 0.2)]
    )  # sent at 100.3, paced at the halved rate
    assert state["step:api"] == pytest.approx(0.04)


# (a fixture)
def test_redis_halves_the_pace_once_for_a_burst_of_429s(redis_url: str) -> None:  # noqa: F811
    """The same rule in the store's Lua script (Redis holds the pace across machines)."""
    import redis

    store = RedisStore(redis_url, "agent-eval:test-burst")
    client = redis.Redis.from_url(redis_url)
    client.hset("agent-eval:test-burst", "gap:api", "0.01")
    store.update([("slower", "step:api", 0.05)] * 20)
    assert float(client.hget("agent-eval:test-burst", "step:api") or 0) == pytest.approx(0.02)
    store.update([("slower", "step:api", 0.0)])  # sent now, after the halving
    assert float(client.hget("agent-eval:test-burst", "step:api") or 0) == pytest.approx(0.04)
    store.close()


def test_requests_that_wake_late_together_are_sent_a_step_apart() -> None:
    """A loaded machine wakes its sleepers late and together: a send gate spaces them apart.

    The permits were slots, so those requests would have reached the provider in one burst; the
    send gate spaces them a step apart.
    """
    state: dict[str, float] = {}
    update_state(state, 100.0, [("set", "step", 0.1)])
    slots = [reserve_state(state, 100.0, "api", 0.0) for _ in range(10)]  # ten permits at once
    assert slots == pytest.approx([k / 10 for k in range(10)])  # the first is due: sent at once
    waits = [send_state(state, 101.0, "api") for _ in range(9)]  # the nine others woke at 101.0
    assert waits == pytest.approx([0.0] + [0.1] * 8)
    assert send_state(state, 101.1, "api") == 0.0  # a step later, the next goes


def test_a_due_permit_is_sent_in_the_same_store_call_unless_the_last_send_was_late() -> None:
    """A due permit goes with one store call (its send recorded); a late send still gates."""
    state: dict[str, float] = {}
    update_state(state, 100.0, [("set", "step", 0.1)])
    assert reserve_state(state, 100.0, "api", 0.0) == 0.0  # due, and sent
    assert send_state(state, 100.05, "api") == pytest.approx(0.05)  # that send is recorded
    assert reserve_state(state, 100.0, "api", 0.0) == pytest.approx(0.1)  # slot 100.1
    assert send_state(state, 100.3, "api") == 0.0  # woke 0.2 s late: sent at 100.3
    assert reserve_state(state, 100.35, "api", 0.0) == pytest.approx(0.05)  # due, gated to 100.4
    assert send_state(state, 100.4, "api") == 0.0


def test_a_sleeper_that_wakes_a_little_late_leaves_the_next_its_turn() -> None:
    """Each wake-up a little late (under a quarter of a step) no longer pushes every later send.

    Before, the next request was a step after the late one: the lateness of every wake-up added up
    over the run (1.06-1.10x the budget's time on a loaded machine).
    """
    state: dict[str, float] = {}
    update_state(state, 100.0, [("set", "step", 0.1)])
    assert reserve_state(state, 100.0, "api", 0.0) == 0.0
    for k in range(1, 20):  # each wakes 20 ms after its slot, and the next is still on its own
        assert reserve_state(state, 100.0 + k / 10 - 0.09, "api", 0.0) == pytest.approx(0.09)
        assert send_state(state, 100.0 + k / 10 + 0.02, "api") == 0.0
    assert send_state(state, 102.0, "api") == 0.0  # the twentieth's turn: 2 s for 20, not 2.4
    assert send_state(state, 102.01, "api") == pytest.approx(0.09)  # sends stay spaced


def test_redis_spaces_late_requests_with_its_own_clock(redis_url: str) -> None:  # noqa: F811
    """The same gate in the store's Lua script, on Redis's clock."""
    store = RedisStore(redis_url, "agent-eval:test-send")
    store.update([("set", "step", 0.5)])
    slots = [store.reserve("api", 0.0) for _ in range(10)]
    assert slots[0] == 0.0 and all(s > 0 for s in slots[1:]), slots  # the first: sent at once
    assert 0.3 < store.send("api") <= 0.5  # that send is recorded
    time.sleep(0.5)
    waits = [store.send("api") for _ in range(9)]  # all at once, whatever their slots
    assert waits[0] == 0.0 and all(0.3 < w <= 0.5 for w in waits[1:]), waits
    store.close()


def test_redis_gives_a_little_late_send_its_turn(redis_url: str) -> None:  # noqa: F811
    """The turn of a send a little late is recorded (Redis's clock), as in the file store."""
    import redis

    store = RedisStore(redis_url, "agent-eval:test-late")
    client = redis.Redis.from_url(redis_url)
    seconds, micros = client.time()
    turn = seconds + micros / 1e6 - 0.01  # the gate opened 10 ms ago
    store.update([("set", "step", 0.5), ("set", "sent", turn - 0.5), ("set", "sent:api", 0)])
    assert store.send("api") == 0.0
    assert float(client.hget("agent-eval:test-late", "sent") or 0) == pytest.approx(turn, abs=1e-5)
    store.update([("set", "sent", turn - 1.5)])  # a second late: recorded as sent now
    assert store.send("api") == 0.0
    assert float(client.hget("agent-eval:test-late", "sent") or 0) > turn + 0.005
    store.close()


def test_openai_and_anthropic_rate_limit_headers_are_read() -> None:
    openai_headers = {
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": "9999",
        "x-ratelimit-reset-requests": "6ms",
        "x-ratelimit-limit-tokens": "200000",
        "x-ratelimit-remaining-tokens": "150000",
        "x-ratelimit-reset-tokens": "15s",
    }
    rates = announced(openai_headers)
    assert rates.requests == pytest.approx(1 / 0.006) and rates.tokens == pytest.approx(50000 / 15)
    anthropic_headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "20",
        "anthropic-ratelimit-requests-reset": "2100-01-01T00:00:00Z",
    }
    rates = announced(anthropic_headers)
    assert (
        rates.requests is not None and 0 < rates.requests < 1e-6 and rates.tokens is None
    )  # 30 over ~74 years
    assert announced({"x-ratelimit-limit-requests": "10"}) == announced(
        {}
    )  # nothing said: nothing learned


def test_a_spent_quota_is_not_retried_and_errors_at_once(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`insufficient_quota`: neither the hook nor the client (`x-should-retry: false`) retries."""
    project.makefile(".yaml", eval_quota=evals("sdk_retries", 1))
    with ChatServer(lambda prompt: None, failures=100, quota_spent=True) as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-traffic")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_quota.yaml:3: case case_0: infrastructure error, not the agent's: POST "
            f"{chat.base_url}/chat/completions answered 429 Too Many Requests: the quota is spent "
            "(insufficient_quota): not retried"
        ]
    )
    assert len(chat.log) == 1


def test_a_wait_beyond_the_cap_is_not_retried_and_says_so(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makefile(".yaml", eval_long=evals("no_retries", 1))
    with ChatServer(lambda prompt: None, failures=100, retry_after="3600") as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-traffic")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*answered 429 Too Many Requests: the server asks to wait 3600 s, more than 60 s*"]
    )
    assert len(chat.log) == 1


def test_the_agents_own_retry_that_succeeds_is_judged_not_an_error(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook gives up (one retry) twice, the agent's own third try succeeds: judged on that."""
    project.makefile(".yaml", eval_own=evals("own_retries", 1))
    with ChatServer(lambda prompt: None, failures=4, retry_after="0") as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-traffic", "--agent-eval-retries", "1")
    result.assert_outcomes(passed=1)
    assert len(chat.log) == 5


SKEW = """
import time

_time, _time_ns = time.time, time.time_ns
time.time = lambda: _time() + 2.0  # this machine's clock is 2 s ahead
time.time_ns = lambda: _time_ns() + 2_000_000_000
"""


@pytest.mark.slow
def test_a_redis_budget_is_stamped_with_redis_clock(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,  # noqa: F811
) -> None:
    """Two processes share a 4/s budget in Redis, one clock 2 s ahead: the provider sees no excess.

    The provider never sees more than the budget in a second (one more for the edges of the window).
    """
    project.makepyfile(skewed_clock=SKEW)
    project.makefile(".yaml", eval_a=evals("no_retries", 10).replace("case_", "a_"))
    project.makefile(".yaml", eval_b=evals("no_retries", 10).replace("case_", "b_"))
    with ChatServer(lambda prompt: None, max_requests=100) as chat:
        point_at(monkeypatch, chat.base_url)
        monkeypatch.setenv("PYTHONPATH", str(project.path))
        common = [sys.executable, "-m", "pytest", *RUN, "--agent-eval-concurrency", "10"]
        common += ["--agent-eval-rate-limit", "4/s", "--agent-eval-rate-limit-url", redis_url]
        runs = [
            subprocess.Popen(
                [*common, "eval_a.yaml"], cwd=project.path, stdout=subprocess.PIPE, text=True
            ),
            subprocess.Popen(
                [*common, "-p", "skewed_clock", "eval_b.yaml"],
                cwd=project.path,
                stdout=subprocess.PIPE,
                text=True,
            ),
        ]
        outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert all("10 passed" in out for out in outputs), outputs
    assert len(chat.log) == 20
    assert busiest_second(chat.log) <= 4 + 1
