"""Many agent calls in flight (SPEC §7): serial's results, -x in order, trial records, repeats."""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET

import pytest

AGENT = '''
import asyncio, threading, time, uuid

lock = threading.Lock()
active = 0
peak = 0
counts = {}

def _enter():
    global active, peak
    with lock:
        active += 1
        peak = max(peak, active)

def _leave():
    global active
    with lock:
        active -= 1

def run(query, context):
    """Sleeps, then answers; `fail` in the query makes the answer miss the expected word."""
    _enter()
    try:
        time.sleep(0.1)
    finally:
        _leave()
    return ("wrong" if "fail" in query else "answer") + f" peak={peak}"

async def run_async(query, context):
    """As `run`, on the event loop."""
    _enter()
    try:
        await asyncio.sleep(0.1)
    finally:
        _leave()
    return f"answer peak={peak}"

def returns_awaitable(query, context):
    """A sync agent whose answer is a coroutine: it is awaited on the loop."""
    async def later():
        await asyncio.sleep(0.01)
        return f"answer to {query}"
    return later()

def flaky(query, context):
    """Every third call for the same query fails: 2 of 3 trials pass, whatever the order."""
    with lock:
        counts[query] = counts.get(query, 0) + 1
        n = counts[query]
    time.sleep(0.02)
    return "answer" if n % 3 else "wrong"

def dispatch_tool(name, args):
    raise RuntimeError("the real tool must not run in evals")

def with_tools(query, context):
    token = uuid.uuid4().hex
    time.sleep(0.03)
    result = dispatch_tool("lookup", {"token": token})
    time.sleep(0.03)
    return f"token={token} result={result}"
'''

CHECKS = """
import itertools
import json
import re

def own_calls(run):
    token = re.search(r"token=(\\w+)", run.output).group(1)
    tokens = [c.args.get("token") for c in run.tool_calls]
    return tokens == [token], f"output token {token}, recorded {tokens}"
"""


def _suite(n: int = 12, failing: tuple[int, ...] = (4, 9)) -> str:
    lines = ["agent: conc_agent:run", "cases:"]
    for i in range(n):
        query = f"q{i} fail" if i in failing else f"q{i}"
        lines.append(
            f"  - {{id: c{i}, input: {query}, tags: [t{i % 2}], expect: {{contains: [answer]}}}}"
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def conc(evals: pytest.Pytester) -> pytest.Pytester:
    evals.makepyfile(conc_agent=AGENT, conc_checks=CHECKS)
    return evals


def _outcomes(result: pytest.RunResult) -> list[str]:
    return sorted(re.findall(r"^(PASSED|FAILED) (\S+)", result.stdout.str(), re.M))  # type: ignore[arg-type]


def _junit(path: pytest.Pytester, name: str) -> list[tuple[str, str, str]]:
    root = ET.parse(path.path / name).getroot()
    out = []
    for tc in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        state = "failed" if tc.find("failure") is not None else "passed"
        out.append((str(tc.get("name")), state, f"{props['score']} {props['location']}"))
    return sorted(out)


def test_same_outcomes_ids_and_junit_with_and_without_concurrency_and_xdist(
    conc: pytest.Pytester,
) -> None:
    conc.makefile(".yaml", eval_conc=_suite())
    runs = {
        "serial": ("-p", "no:cacheprovider"),
        "c8": ("-p", "no:cacheprovider", "--agent-eval-concurrency", "8"),
        "n2": ("-p", "no:cacheprovider", "-n", "2"),
        "n2c4": ("-p", "no:cacheprovider", "-n", "2", "--agent-eval-concurrency", "4"),
    }
    results = {}
    for name, args in runs.items():
        result = conc.runpytest(*args, "-rA", f"--junitxml={name}.xml")
        result.assert_outcomes(passed=10, failed=2)
        results[name] = result
    expected = _outcomes(results["serial"])
    assert ("FAILED", "eval_conc.yaml::c4") in expected
    for name in runs:
        assert _outcomes(results[name]) == expected, name
        assert _junit(conc, f"{name}.xml") == _junit(conc, "serial.xml"), name
    # concurrency really ran calls at once: the agent saw several in flight (serial never does)
    assert "peak=1" in results["serial"].stdout.str()
    peaks = [int(p) for p in re.findall(r"peak=(\d+)", results["c8"].stdout.str())]
    assert max(peaks) > 1


def test_the_scheduler_is_a_plugin_only_at_concurrency_above_one(conc: pytest.Pytester) -> None:
    """As xdist makes its DSession only with -n: at concurrency 1 no scheduler is made or loaded."""
    conc.makefile(".yaml", eval_conc=_suite(2, failing=()))
    conc.makeconftest(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        "    plugin = session.config.pluginmanager.get_plugin('agent_eval_scheduler')\n"
        "    loaded = 'pytest_agent_eval.plugin.scheduler' in sys.modules\n"
        "    print(f'scheduler: {type(plugin).__name__} imported: {loaded}')\n"
    )
    serial = conc.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    serial.assert_outcomes(passed=2)
    assert "scheduler: NoneType imported: False" in serial.stdout.str()
    concurrent = conc.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--agent-eval-concurrency", "2"
    )
    concurrent.assert_outcomes(passed=2)
    assert "scheduler: Scheduler imported: True" in concurrent.stdout.str()


def test_x_stops_at_the_first_failure_in_collection_order(conc: pytest.Pytester) -> None:
    conc.makefile(".yaml", eval_conc=_suite(failing=(4, 9)))
    result = conc.runpytest("--agent-eval-concurrency", "8", "-x", "-v")
    result.assert_outcomes(passed=4, failed=1)
    out = result.stdout.str()
    assert re.findall(r"::(c\d+) (PASSED|FAILED)", out) == [
        ("c0", "PASSED"), ("c1", "PASSED"), ("c2", "PASSED"), ("c3", "PASSED"), ("c4", "FAILED"),
    ]  # fmt: skip


def test_selection_composes_with_concurrency(conc: pytest.Pytester) -> None:
    conc.makefile(".yaml", eval_conc=_suite())
    result = conc.runpytest("--agent-eval-concurrency", "4", "-m", "t1")
    result.assert_outcomes(passed=5, failed=1, deselected=6)
    conc.runpytest("--agent-eval-concurrency", "4", "--lf").assert_outcomes(
        failed=1
    )  # only c9 ran and failed


def test_trials_record_only_their_own_tool_calls(conc: pytest.Pytester) -> None:
    conc.makefile(
        ".yaml",
        eval_tools="""\
agent: conc_agent:with_tools
tool_dispatch: conc_agent:dispatch_tool
defaults:
  repeat: 6
  tool_mocks: {lookup: found}
  expect: {custom: [conc_checks:own_calls], contains: [result=found]}
cases:
  - {id: a, input: one}
  - {id: b, input: two}
  - {id: c, input: three}
""",
    )
    result = conc.runpytest("--agent-eval-concurrency", "8")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_repeat_with_min_pass_rate_on_a_flaky_agent(
    conc: pytest.Pytester, concurrency: str
) -> None:
    conc.makefile(
        ".yaml",
        eval_flaky="""\
agent: conc_agent:flaky
cases:
  - {id: lenient, input: a, repeat: 3, min_pass_rate: 0.6, expect: {contains: [answer]}}
  - {id: strict, input: b, repeat: 3, min_pass_rate: 0.8, expect: {contains: [answer]}}
  - {id: default_rate, input: c, repeat: 3, expect: {contains: [answer]}}
""",
    )
    result = conc.runpytest("--agent-eval-concurrency", concurrency, "--junitxml=r.xml")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "case strict failed: 2/3 trials passed (min_pass_rate 0.8)",
            "first failing trial (#*): 1 of 1 checks failed (score 0.00)",
            "  ✗ contains: output lacks 'answer' (score 0.00)",
        ]
    )
    props = {
        tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")}
        for tc in ET.parse(conc.path / "r.xml").getroot().iter("testcase")
    }
    assert props["lenient"]["passes"] == "2/3"
    assert props["strict"]["passes"] == "2/3"


def test_repeat_option_applies_to_every_case(conc: pytest.Pytester) -> None:
    conc.makefile(
        ".yaml",
        eval_flaky="agent: conc_agent:flaky\ncases:\n"
        "  - {id: once, input: z, min_pass_rate: 0.5, expect: {contains: [answer]}}\n",
    )
    result = conc.runpytest("--agent-eval-repeat", "3", "--junitxml=r.xml")
    result.assert_outcomes(passed=1)
    tc = next(ET.parse(conc.path / "r.xml").getroot().iter("testcase"))
    assert {p.get("name"): p.get("value") for p in tc.iter("property")}["passes"] == "2/3"


PEAK_REPORTER = """
import re, pytest, conc_agent

peaks = []

def pytest_agent_eval_case_result(item, result):
    peaks.append(int(re.search(r"peak=(\\d+)", result.shown_trial.run.output).group(1)))

def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"MAXPEAK={max(peaks)}")

@pytest.fixture(scope="{scope}")
def agent():
    return conc_agent.run
"""


@pytest.mark.parametrize(("scope", "prefetched"), [("session", True), ("function", False)])
def test_agent_fixture_scope_decides_whether_cases_start_early(
    conc: pytest.Pytester, scope: str, prefetched: bool
) -> None:
    conc.makefile(".yaml", eval_fix=_suite(n=8, failing=()).replace("agent: conc_agent:run\n", ""))
    conc.makeconftest(PEAK_REPORTER.replace("{scope}", scope))
    result = conc.runpytest("--agent-eval-concurrency", "8")
    result.assert_outcomes(passed=8)
    peak = int(re.search(r"MAXPEAK=(\d+)", result.stdout.str()).group(1))  # type: ignore[union-attr]
    assert (peak > 1) == prefetched, peak


def test_bad_concurrency_value(conc: pytest.Pytester) -> None:
    result = conc.runpytest("--agent-eval-concurrency", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agent-eval-concurrency must be at least 1, got 0*"])


SLOW_CHECK = """
import json, os, time
from pytest_agent_eval import CheckResult

def slow_ok(run, spec, ctx):
    start = time.monotonic()
    time.sleep(0.3)  # blocking I/O of a plugin's check
    with open(os.path.join(os.path.dirname(__file__), "intervals.jsonl"), "a") as out:
        out.write(json.dumps([start, time.monotonic()]) + "\\n")
    return CheckResult.of("slow_ok", True)

def pytest_agent_eval_register_checks(registry):
    registry.register("slow_ok", slow_ok, {"const": True})
"""


def test_a_blocking_check_from_a_plugin_runs_off_the_loop(conc: pytest.Pytester) -> None:
    """Checks registered through the hook may block: they run in threads, so the checks overlap."""
    conc.makeconftest(SLOW_CHECK)
    conc.makefile(
        ".yaml", eval_slow=_suite(n=8, failing=()).replace("contains: [answer]", "slow_ok: true")
    )
    result = conc.runpytest("--agent-eval-concurrency", "8")
    result.assert_outcomes(passed=8)
    lines = (conc.path / "intervals.jsonl").read_text().splitlines()
    intervals = sorted(json.loads(line) for line in lines)
    assert len(intervals) == 8
    overlapping = [(a, b) for a, b in itertools.pairwise(intervals) if b[0] < a[1]]
    assert overlapping, f"every check ran alone, one after the other: {intervals}"


def test_the_limit_holds_for_sync_and_async_agents_together(conc: pytest.Pytester) -> None:
    """Sync agents run in worker threads, async ones on the loop: one limit bounds them all."""
    sync = _suite(n=12, failing=())
    conc.makefile(
        ".yaml", eval_sync=sync, eval_async=sync.replace("conc_agent:run", "conc_agent:run_async")
    )
    conc.makeconftest(PEAK_REPORTER.split("@pytest.fixture")[0])
    result = conc.runpytest("--agent-eval-concurrency", "3")
    result.assert_outcomes(passed=24)
    peak = int(re.search(r"MAXPEAK=(\d+)", result.stdout.str()).group(1))  # type: ignore[union-attr]
    assert 1 < peak <= 3, peak


def test_a_sync_agents_awaitable_answer_is_awaited_at_concurrency(conc: pytest.Pytester) -> None:
    conc.makefile(
        ".yaml",
        eval_later=_suite(n=6, failing=()).replace(
            "conc_agent:run", "conc_agent:returns_awaitable"
        ),
    )
    result = conc.runpytest("--agent-eval-concurrency", "4", "-rA")
    result.assert_outcomes(passed=6)


def test_cases_started_early_leave_no_tool_recording_behind(conc: pytest.Pytester) -> None:
    """A long run at concurrency keeps no trial's tool recording once its case has finished.

    The scheduler's session-long tool mocks used to keep every recording it handed out (issue 38:
    memory that grew with the run).
    """
    conc.makeconftest(
        """
import gc

def pytest_sessionfinish(session):
    from pytest_agent_eval.mocks.recording import Recording

    gc.collect()
    alive = sum(isinstance(o, Recording) for o in gc.get_objects())
    with open("recordings.txt", "w") as out:
        out.write(str(alive))
"""
    )
    conc.makefile(".yaml", eval_many=_suite(n=40, failing=()))
    conc.runpytest_subprocess("--agent-eval-concurrency", "4").assert_outcomes(passed=40)
    assert int((conc.path / "recordings.txt").read_text()) <= 4


ENVIRON_AGENT = '''
import os

def run(query, context):
    """Reads the whole environment many times, as HTTP clients do to find proxies."""
    for _ in range(300):
        dict(os.environ.items())
    return "answer"
'''


def test_a_sync_agent_may_read_the_environment_while_items_run(evals: pytest.Pytester) -> None:
    """pytest pops PYTEST_CURRENT_TEST after each item; cases in flight read ``os.environ``.

    An HTTP client (httpx, which ``openai.OpenAI()`` builds) iterates the environment for proxies:
    a key removed between its listing and its lookup raised ``KeyError: 'PYTEST_CURRENT_TEST'`` in
    an agent, a case failed for nothing it did.
    """
    evals.makepyfile(environ_agent=ENVIRON_AGENT)
    lines = ["agent: environ_agent:run", "cases:"]
    lines += [f"  - {{id: c{i}, input: q{i}, expect: {{contains: [answer]}}}}" for i in range(400)]
    evals.makefile(".yaml", eval_environ="\n".join(lines) + "\n")
    result = evals.runpytest_subprocess("-p", "no:cacheprovider", "--agent-eval-concurrency", "16")
    result.assert_outcomes(passed=400)
    assert "KeyError" not in result.stdout.str()


CALLS_AGENT = '''
def run(query, context):
    """Notes each query it is called with."""
    with open("calls.txt", "a") as out:
        out.write(query + "\\n")
    return "answer"
'''


def test_cases_marked_skip_are_never_started_early(evals: pytest.Pytester) -> None:
    """A case whose item, or a node above it, is marked ``skip``/``skipif`` never calls its agent.

    Marks added by a conftest after collection, on the item itself and on its file's node.
    """
    evals.makepyfile(calls_agent=CALLS_AGENT)
    for name in ("eval_a", "eval_b"):
        lines = ["agent: calls_agent:run", "cases:"]
        lines += [f"  - {{id: c{i}, input: {name}-q{i}}}" for i in range(6)]
        evals.makefile(".yaml", **{name: "\n".join(lines) + "\n"})
    evals.makeconftest(
        """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "c2":
            item.add_marker(pytest.mark.skip(reason="not this one"))
        if item.name == "c4":
            item.add_marker(pytest.mark.skipif(True, reason="nor this one"))
        if item.path.name == "eval_b.yaml":
            item.parent.add_marker(pytest.mark.skip(reason="nor this file"))
"""
    )
    result = evals.runpytest("-p", "no:cacheprovider", "--agent-eval-concurrency", "8", "-rs")
    result.assert_outcomes(passed=4, skipped=8)
    called = sorted((evals.path / "calls.txt").read_text().split())
    assert called == [f"eval_a-q{i}" for i in (0, 1, 3, 5)]
