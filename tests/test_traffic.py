"""The LLM traffic layer (SPEC §14) as users run it, with real clients against a loopback server.

The real `openai` client (sync and async) and a LangGraph agent against the loopback
chat-completions server — usage and cost per case, retries, infrastructure errors, record and
replay (with the server stopped), per-case cassettes with no secret in them.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from openai_server import ChatServer

pytest.importorskip("openai")

AGENTS = '''
import os
import openai

MODEL = "loopback-model"


def sync_agent(query):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content


async def async_agent(query):
    async with openai.AsyncOpenAI(max_retries=0) as client:
        first = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", \
"content": query}])
        second = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": query + " again"}]
        )
    return first.choices[0].message.content + " / " + second.choices[0].message.content


def graph_agent():
    """A LangGraph graph whose one node asks the LLM through the openai client."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    async def ask(state):
        async with openai.AsyncOpenAI(max_retries=0) as client:
            prompt = state["messages"][-1].content
            reply = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", \
"content": prompt}])
        return {"messages": [{"role": "assistant", "content": reply.choices[0].message.content}]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph.compile()


GRAPH = graph_agent() if os.environ.get("WITH_GRAPH") else None
'''

USAGE_HOOK = """
import json

try:  # the openai client's HTTP library: httpx2 in its newer releases, httpx before
    import httpx2
except ImportError:
    import httpx as httpx2


def pytest_agent_eval_case_result(item, result):
    hooked = httpx2.HTTPTransport.handle_request.__module__.startswith("pytest_agent_eval")
    with open("usage.jsonl", "a") as out:
        for trial in result.trials:
            use = {"case": item.case.id, "usage": trial.run.usage, "error": trial.run.error, \
"hooked": hooked}
            out.write(json.dumps(use) + "\\n")
"""

PRICES = '{"loopback-model": {"input": 1.0, "output": 2.0}}'


def evals_file(agent: str, cases: int = 2, repeat: int = 1) -> str:
    lines = [f"agent: traffic_agents:{agent}", "cases:"]
    for n in range(cases):
        lines += [f"  - id: case_{n}", f"    input: Question {n}", f"    repeat: {repeat}"]
        lines += ["    expect:", "      contains: [without tools]"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with ChatServer(lambda prompt: None, max_requests=500) as chat:
        point_at(monkeypatch, chat.base_url)
        yield chat


def point_at(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-secret-key")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(traffic_agents=AGENTS)
    pytester.makeconftest(USAGE_HOOK)
    pytester.makeini(f"[pytest]\nagent_eval_prices = {PRICES}\n")
    pytester.syspathinsert()
    return pytester


def usages(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    path = pytester.path / "usage.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return sorted((json.loads(line) for line in lines), key=lambda u: u["case"])


RUN = ("-p", "no:cacheprovider", "-p", "no:randomly")


def has_langgraph() -> bool:
    try:
        import langgraph  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("agent, calls", [("sync_agent", 1), ("async_agent", 2)])
def test_usage_and_cost_per_case_are_exact(
    project: pytest.Pytester, server: ChatServer, agent: str, calls: int
) -> None:
    project.makefile(".yaml", eval_usage=evals_file(agent))
    result = project.runpytest(*RUN)
    result.assert_outcomes(passed=2)
    found = usages(project)
    assert [u["case"] for u in found] == ["case_0", "case_1"]
    assert all(u.pop("hooked") for u in found)
    for use in (
        found
    ):  # the server reports 10 prompt and 5 completion tokens per answer; $1 and $2 per million
        assert use["usage"] == {
            "input_tokens": 10 * calls,
            "output_tokens": 5 * calls,
            "total_tokens": 15 * calls,
            "cost": pytest.approx(calls * (10 * 1.0 + 5 * 2.0) / 1e6),
            "requests": calls,
        }


def test_usage_is_attributed_to_each_trial_under_concurrency(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makefile(".yaml", eval_usage=evals_file("async_agent", cases=6, repeat=3))
    result = project.runpytest(*RUN, "--agent-eval-concurrency", "8")
    result.assert_outcomes(passed=6)
    found = usages(project)
    assert len(found) == 18
    assert all(u["usage"]["requests"] == 2 and u["usage"]["input_tokens"] == 20 for u in found)


LAZY_AGENT = """
def run(query):
    import openai  # its HTTP client loads with the first case's call, after the hook started

    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model="loopback-model", messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content
"""
LAZY_USAGE = """
import json


def pytest_agent_eval_case_result(item, result):  # imports no HTTP client of its own
    with open("usage.jsonl", "a") as out:
        for trial in result.trials:
            out.write(json.dumps({"case": item.case.id, "usage": trial.run.usage}) + "\\n")
"""


def test_a_client_the_agent_imports_in_its_call_is_watched_from_its_first_request(
    project: pytest.Pytester, server: ChatServer
) -> None:
    """The hook imports no HTTP client (issue 38): one loaded later is hooked as its import ends."""
    project.makepyfile(lazy_agent=LAZY_AGENT)
    project.makeconftest(LAZY_USAGE)
    project.makefile(
        ".yaml",
        eval_lazy=evals_file("sync_agent").replace("traffic_agents:sync_agent", "lazy_agent:run"),
    )
    result = project.runpytest_subprocess(*RUN, "--agent-eval-traffic", "eval_lazy.yaml")
    result.assert_outcomes(passed=2)
    found = usages(project)
    assert [u["case"] for u in found] == ["case_0", "case_1"]
    assert [u["usage"]["requests"] for u in found] == [1, 1]


def test_a_model_without_a_price_has_no_cost(project: pytest.Pytester, server: ChatServer) -> None:
    project.makeini("[pytest]\nagent_eval_traffic = true\n")
    project.makefile(".yaml", eval_usage=evals_file("sync_agent", cases=1))
    project.runpytest(*RUN).assert_outcomes(passed=1)
    (use,) = usages(project)
    assert use["usage"]["cost"] is None and use["usage"]["unpriced_models"] == ["loopback-model"]
    assert use["usage"]["input_tokens"] == 10


@pytest.mark.parametrize("pace", ["on", "off"])
def test_without_a_traffic_option_nothing_is_counted_and_only_the_pace_hooks(
    project: pytest.Pytester, server: ChatServer, pace: str
) -> None:
    project.makeini("[pytest]\n")
    project.makefile(".yaml", eval_usage=evals_file("sync_agent", cases=1))
    project.runpytest(*RUN, "--agent-eval-pace", pace).assert_outcomes(passed=1)
    (use,) = usages(project)
    assert use["usage"] == {} and use["hooked"] == (pace == "on")


def test_a_langgraph_agent_is_counted(
    project: pytest.Pytester, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langgraph")
    monkeypatch.setenv("WITH_GRAPH", "1")
    project.makefile(".yaml", eval_graph=evals_file("GRAPH", cases=2))
    project.runpytest(*RUN).assert_outcomes(passed=2)
    assert [u["usage"]["total_tokens"] for u in usages(project)] == [15, 15]


# -- retries and infrastructure errors
# ----------------------------------------------------------------------


def test_two_429s_then_200_pass_the_case(project: pytest.Pytester, server: ChatServer) -> None:
    server.failures = 2
    project.makefile(".yaml", eval_retry=evals_file("sync_agent", cases=1))
    project.runpytest(*RUN).assert_outcomes(passed=1)
    assert len(server.log) == 3
    (use,) = usages(project)
    assert use["usage"]["requests"] == 1 and use["error"] is None


@pytest.mark.parametrize("status", [429, 503])
def test_a_server_that_always_fails_ends_the_case_as_error(
    project: pytest.Pytester, server: ChatServer, status: int
) -> None:
    server.failures, server.failure_status = 1000, status
    project.makefile(".yaml", eval_retry=evals_file("sync_agent", cases=1))
    result = project.runpytest(*RUN, "--agent-eval-retries", "2")
    result.assert_outcomes(errors=1)
    assert len(server.log) == 3  # the first try and two retries; the agent saw only the last answer
    reason = "Too Many Requests" if status == 429 else "Service Unavailable"
    result.stdout.fnmatch_lines(
        [
            "*ERROR at call of case_0*",
            "eval_retry.yaml:3: case case_0: infrastructure error, not the agent's: "
            f"POST {server.base_url}/chat/completions answered {status} {reason} after 2 retries",
            "*short test summary info*",
            "ERROR eval_retry.yaml::case_0 - InfrastructureError: eval_retry.yaml:3*",
        ]
    )
    assert "1 error" in result.stdout.lines[-1] and "failed" not in result.stdout.lines[-1]


def test_an_infrastructure_error_reads_as_error_under_xdist(
    project: pytest.Pytester, server: ChatServer
) -> None:
    server.failures = 1000
    project.makefile(".yaml", eval_retry=evals_file("sync_agent", cases=2))
    result = project.runpytest(
        "-p", "no:randomly", "-n", "2", "--agent-eval-retries", "0", "--junitxml=r.xml"
    )
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*answered 429 Too Many Requests", "*answered 429 Too Many Requests"]
    )
    suite = ElementTree.parse(project.path / "r.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("errors"), suite.get("failures")) == ("2", "0")
    cases = suite.findall("testcase")
    assert [
        [child.tag for child in case if child.tag in ("error", "failure")] for case in cases
    ] == [["error"]] * 2
    assert "429 Too Many Requests" in (cases[0].find("error").get("message") or "")  # type: ignore[union-attr]


def test_connection_refused_is_an_error_naming_the_request(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChatServer(lambda prompt: None) as gone:
        url = gone.base_url
    point_at(monkeypatch, url)
    project.makefile(".yaml", eval_refused=evals_file("sync_agent", cases=1))
    result = project.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [f"*infrastructure error, not the agent's: POST {url}/chat/completions failed: *"]
    )


def test_retries_option_is_checked(project: pytest.Pytester) -> None:
    result = project.runpytest(*RUN, "--agent-eval-retries", "-1")
    result.stderr.fnmatch_lines(["*--agent-eval-retries must be at least 0, got -1*"])


# -- record and replay
# --------------------------------------------------------------------------------------


def cassette_texts(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("cassettes/**/*.yaml"))
    }


def test_record_then_replay_with_the_server_stopped(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makefile(".yaml", eval_rr=evals_file("async_agent", cases=3, repeat=2))
    if has_langgraph():
        monkeypatch.setenv("WITH_GRAPH", "1")
        project.makefile(".yaml", eval_graph=evals_file("GRAPH", cases=2))
    with ChatServer(lambda prompt: None) as chat:
        point_at(monkeypatch, chat.base_url)
        recorded = project.runpytest(*RUN, "--agent-eval-record")
        graphs = 2 if has_langgraph() else 0
        recorded.assert_outcomes(passed=3 + graphs)
        assert len(chat.log) == 12 + graphs
    recorded_usage = usages(project)
    texts = cassette_texts(project.path)
    expected = [f"cassettes/eval_graph/case_{n}.yaml" for n in range(graphs)]
    assert sorted(texts) == [*expected, *(f"cassettes/eval_rr/case_{n}.yaml" for n in range(3))]
    for text in texts.values():
        assert "sk-loopback" not in text and "uthorization" not in text
    data = __import__("yaml").safe_load(texts["cassettes/eval_rr/case_0.yaml"])
    assert data["version"] == 1 and len(data["interactions"]) == 4
    first = data["interactions"][0]
    assert (
        first["request"]["method"] == "POST"
        and first["request"]["uri"] == f"{chat.base_url}/chat/completions"
    )
    assert first["response"]["status"] == {"code": 200, "message": "OK"}
    assert json.loads(first["response"]["body"]["string"])["usage"]["prompt_tokens"] == 10
    assert [i["trial"] for i in data["interactions"]] == [1, 1, 2, 2]

    replayed = project.runpytest(
        *RUN, "--agent-eval-replay"
    )  # the server is gone: nothing reaches a socket
    replayed.assert_outcomes(passed=3 + graphs)
    assert usages(project) == recorded_usage  # same outcomes, same usage and cost


def test_a_replay_miss_errors_only_its_case_naming_the_request(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makefile(".yaml", eval_rr=evals_file("sync_agent", cases=2))
    with ChatServer(lambda prompt: None) as chat:
        point_at(monkeypatch, chat.base_url)
        project.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=2)
    path = project.path / "eval_rr.yaml"
    path.write_text(path.read_text().replace("Question 1", "Question changed"))
    result = project.runpytest(*RUN, "--agent-eval-replay")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_rr.yaml:8: case case_1: infrastructure error, not the agent's: replay miss: "
            f"POST {chat.base_url}/chat/completions (no recorded answer in "
            "cassettes/eval_rr/case_1.yaml; record it with --agent-eval-record=new)",
            "*short test summary info*",
            "ERROR eval_rr.yaml::case_1 - InfrastructureError: *",
        ]
    )


def test_record_new_keeps_what_is_recorded_and_adds_what_is_missing(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makefile(".yaml", eval_rr=evals_file("sync_agent", cases=1))
    with ChatServer(lambda prompt: None) as chat:
        point_at(monkeypatch, chat.base_url)
        project.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=1)
        project.makefile(".yaml", eval_rr=evals_file("sync_agent", cases=2))
        project.runpytest(*RUN, "--agent-eval-record=new").assert_outcomes(passed=2)
        assert len(chat.log) == 2  # case_0 was answered from its cassette
    assert sorted(cassette_texts(project.path)) == [
        "cassettes/eval_rr/case_0.yaml",
        "cassettes/eval_rr/case_1.yaml",
    ]
    project.runpytest(*RUN, "--agent-eval-replay").assert_outcomes(passed=2)


def test_cassettes_folder_from_the_ini_and_matching_ignores_named_fields(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makeini("[pytest]\nagent_eval_cassettes = recorded\nagent_eval_match_ignore = model\n")
    project.makefile(".yaml", eval_rr=evals_file("sync_agent", cases=1))
    with ChatServer(lambda prompt: None) as chat:
        point_at(monkeypatch, chat.base_url)
        project.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=1)
    assert (project.path / "recorded" / "eval_rr" / "case_0.yaml").is_file()
    agents = project.path / "traffic_agents.py"
    agents.write_text(
        agents.read_text().replace('MODEL = "loopback-model"', 'MODEL = "another-model"')
    )
    project.runpytest(*RUN, "--agent-eval-replay").assert_outcomes(passed=1)


def test_record_and_replay_together_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest(*RUN, "--agent-eval-record", "--agent-eval-replay")
    result.stderr.fnmatch_lines(["*--agent-eval-record and --agent-eval-replay: choose one*"])


# -- rate limits shared by every worker
# ---------------------------------------------------------------------


def busiest_second(times: list[float]) -> int:
    """The most requests the server saw in any one-second window."""
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u < t + 1.0) for i, t in enumerate(times))


def run_rate_limited(project: pytest.Pytester, server: ChatServer, *extra: str) -> None:
    project.makefile(".yaml", eval_rate=evals_file("sync_agent", cases=14))
    args = (
        "-p",
        "no:randomly",
        "-n",
        "2",
        "--agent-eval-concurrency",
        "16",
        "--agent-eval-rate-limit",
        "4/s",
    )
    result = project.runpytest(*args, *extra)
    result.assert_outcomes(passed=14)
    assert len(server.log) == 14
    assert busiest_second(server.log) <= 4 + 1  # one more for the clock edges of the window
    assert max(server.log) - min(server.log) >= 2.0  # 14 requests at 4/s: at least three windows


@pytest.mark.slow
def test_the_rate_limit_holds_across_xdist_workers_and_concurrency(
    project: pytest.Pytester, server: ChatServer
) -> None:
    run_rate_limited(project, server)


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_a_budget_is_written_n_per_unit(project: pytest.Pytester, xdist: tuple[str, ...]) -> None:
    """Under ``-n`` too: the controller, which hooks no client, still reads the budget first."""
    result = project.runpytest(*RUN, *xdist, "--agent-eval-rate-limit", "4/day")
    result.stderr.fnmatch_lines(
        ["*--agent-eval-rate-limit '4/day': write the budget as N/s, N/min or N/h*"]
    )


def test_the_token_limit_makes_requests_wait(project: pytest.Pytester, server: ChatServer) -> None:
    project.makefile(".yaml", eval_tokens=evals_file("sync_agent", cases=4))
    result = project.runpytest(
        *RUN, "--agent-eval-token-limit", "30/s"
    )  # 15 tokens per answer: 2 answers a second
    result.assert_outcomes(passed=4)
    assert max(server.log) - min(server.log) >= 0.9


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A real redis-server on a loopback port (the Debian package; CI installs it), else a skip."""
    pytest.importorskip("redis")
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [*args, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
def test_the_rate_limit_holds_with_the_redis_bucket(
    project: pytest.Pytester, server: ChatServer, redis_url: str
) -> None:
    run_rate_limited(project, server, "--agent-eval-rate-limit-url", redis_url)


# -- in the reports
# ------------------------------------------------------------------------------------------


def test_the_json_report_and_summary_carry_usage_cost_and_infrastructure_errors(
    project: pytest.Pytester, server: ChatServer
) -> None:
    server.failures = 1  # the first request: 429, retried; then answers
    project.makefile(".yaml", eval_usage=evals_file("async_agent", cases=2))
    project.makefile(".yaml", eval_down=evals_file("sync_agent", cases=1).replace("case_0", "down"))
    agents = project.path / "traffic_agents.py"
    agents.write_text(
        agents.read_text().replace(
            "def sync_agent(query):\n    client = openai.OpenAI(max_retries=0)",
            "def sync_agent(query):\n"
            "    client = openai.OpenAI(max_retries=0, base_url='http://127.0.0.1:9/v1')",
        )
    )
    result = project.runpytest(*RUN, "--agent-eval-report", "report.json", "-n", "0")
    result.assert_outcomes(passed=2, errors=1)
    cases = {
        c["case_id"]: c for c in json.loads((project.path / "report.json").read_text())["cases"]
    }
    for name in ("case_0", "case_1"):
        assert cases[name]["outcome"] == "passed"
        assert cases[name]["tokens"] == {"input": 20, "output": 10, "total": 30}
        assert cases[name]["cost"] == pytest.approx(2 * (10 * 1.0 + 5 * 2.0) / 1e6)
    assert cases["down"]["outcome"] == "error"
    assert cases["down"]["error"].startswith(
        "infrastructure error (not the agent's): POST "
        "http://127.0.0.1:9/v1/chat/completions failed: "
    )
    result.stdout.fnmatch_lines(["*agent eval summary*", "*tokens*cost*"])
