"""Faults stay in their case (SPEC §7, §13): whatever an agent does, the run ends cleanly.

Every good case passes and the bad one fails with one message — serially, with many calls in
flight, and under ``-n 2``.

The faults that leave the run going on share one run per mode (each in files of its own, read by its
test); an agent that blocks or spins, Ctrl-C and a crashing worker each have runs of their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from shared_run import SharedRun, run_pytest, write_files

AGENTS = """
import asyncio, os, sys, time

def good(query, context):
    return "answer"

def exits(query, context):
    sys.exit(3)

async def aexits(query, context):
    sys.exit(3)

def stops(query, context):
    raise StopIteration

async def astops(query, context):
    raise StopIteration

def dispatch_tool(name, args):
    raise RuntimeError("the real tool must not run")

def uses_tool(query, context):
    return str(dispatch_tool("lookup", {"q": query}))

def interrupts(query, context):
    raise KeyboardInterrupt

def retitles(query, context):
    return "answer \\x1b]0;pwned\\x07 and \\x1b[2J done"

def deep(query, context):
    args = {}
    for _ in range(10000):
        args = {"x": args}
    return {"output": "answer", "tools_called": [{"name": "lookup", "args": args}]}

async def blocks(query, context):
    time.sleep(2)  # holds the event loop: no await
    return "answer"

async def spins(query, context):
    while True:
        pass

async def slow(query, context):
    await asyncio.sleep(0.3)
    return "answer"

def ends_process(query, context):
    time.sleep(0.2)
    os._exit(1)

def sleepy(query, context):
    time.sleep(0.3)
    return "answer"

def letters(query, context):
    return "a" * 40 + "b"

class Broken:
    def __init__(self):
        raise ValueError("no API key")

    def run(self, query):
        return "answer"

async def unhurried(query, context):
    await asyncio.sleep(0.5)
    return "answer"
"""

MODES = {
    "serial": [],
    "concurrent": ["--agent-eval-concurrency", "8"],
    "xdist": ["-n", "2", "--agent-eval-concurrency", "4"],
}


def good_file(n: int = 4, extra: str = "") -> str:
    lines = ["agent: fault_agents:good", "cases:"]
    lines += [
        f"  - {{id: good{i}, input: q{i}, expect: {{contains: [answer]}}{extra}}}" for i in range(n)
    ]
    return "\n".join(lines) + "\n"


def bad_file(agent: str, extra: str = "", head: str = "") -> str:
    return (
        f"agent: fault_agents:{agent}\n{head}cases:\n"
        f"  - {{id: before, input: a, expect: {{contains: [answer]}}{extra}}}\n"
        f"  - {{id: bad, input: b, expect: {{contains: [answer]}}{extra}}}\n"
    )


@pytest.fixture
def faults(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "400")  # the short summary lines in full
    pytester.makepyfile(fault_agents=AGENTS)
    pytester.syspathinsert()
    return pytester


# hypothesis's plugin compiles its package at the terminal summary, while an abandoned agent thread
# may still run:
# CPython 3.11 before 3.11.8 can fail two threads compiling at once (gh-106905, "AST constructor
# recursion depth
# mismatch"). These runs do not need it.
OPTIONS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--timeout", "60", "-rA")


def run(
    pytester: pytest.Pytester, mode: str, *args: str, ok_exit: tuple[int, ...] = (0, 1)
) -> pytest.RunResult:
    """The run ends without an internal error (pytest-timeout inside, a hard limit outside)."""
    result = pytester.runpytest_subprocess(*OPTIONS, *MODES[mode], *args, timeout=180)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output, output
    assert result.ret in ok_exit, output
    return result


def shows(result: pytest.RunResult, *lines: str) -> None:
    """Each line is printed as a line of its own (the failure text, not the shortened summary)."""
    printed = [line.strip() for line in result.stdout.lines]
    for line in lines:
        assert line in printed, f"{line!r} not printed:\n{result.stdout.str()}"


FAULTS = {  # file: (agent, case fields, file head, the failure's summary line)
    "eval_sync_exit": ("exits", "", "", "agent called sys.exit(3)"),
    "eval_async_exit": ("aexits", "", "", "agent called sys.exit(3)"),
    "eval_exit_with_timeout": ("exits", ", timeout: 5", "", "agent called sys.exit(3)"),
    "eval_sync_stop": ("stops", "", "", "agent raised StopIteration"),
    "eval_async_stop": ("astops", "", "", "agent raised StopIteration"),
    "eval_stop_with_timeout": ("stops", ", timeout: 5", "", "agent raised StopIteration"),
    "eval_tool_stop": (
        "uses_tool",
        ", timeout: 5",
        "tool_dispatch: fault_agents:dispatch_tool\n"
        "defaults: {tool_mocks: {lookup: {raise: StopIteration}}}\n",
        "agent raised StopIteration",
    ),
}

RETITLES = (
    bad_file("retitles", head='description: "\\x1b]0;file\\x07"\n')
    .replace("expect: {contains: [answer]}", "expect: {contains: [missing]}")
    .replace("id: bad,", 'id: bad, description: "title \\x1b]0;pwned\\x07",')
)

# The faults that leave the run going on, each a bad file beside good ones (`<name>_ok.yaml`, run
# next to it):
# one run of them all per mode, which each test reads for its own files.
SCENARIOS = {  # name: (the bad file, its good neighbour)
    "eval_broken": (bad_file("Broken"), good_file(6)),
    "eval_retitle": (RETITLES, good_file(6)),
    "eval_deep": (
        bad_file("deep").replace(
            "expect: {contains: [answer]}", "expect: {tools_called: [search]}"
        ),
        good_file(6),
    ),
    "eval_regex": (
        bad_file("letters", ", timeout: 1").replace(
            "expect: {contains: [answer]}", 'expect: {regex: "(a+)+$"}'
        ),
        good_file(6, ", timeout: 1"),
    ),
}


@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], SharedRun]:
    """The run of a mode: this module's faults that leave the run going on, in one run of them all.

    Each file runs once per mode (`-v`, short summary in full).
    """
    runs: dict[str, SharedRun] = {}

    def run_of(mode: str) -> SharedRun:
        if mode not in runs:
            files = {
                f"{name}.yaml": bad_file(agent, extra, head)
                for name, (agent, extra, head, _) in FAULTS.items()
            }
            files["eval_good.yaml"] = good_file(8)
            for name, (bad, good) in SCENARIOS.items():
                files |= {f"{name}.yaml": bad, f"{name}_ok.yaml": good}
            path = tmp_path_factory.mktemp(f"faults-{mode}") / "run"
            write_files(
                path, {"fault_agents.py": AGENTS.strip() + "\n", **files}
            )  # as makepyfile writes it
            # -v: the -v report sections (agent output, tool calls) some tests read; the failure
            # text is the same
            runs[mode] = run_pytest(path, *OPTIONS, *MODES[mode], "-v", timeout=180, COLUMNS="400")
            assert runs[mode].ret == 1, repr(runs[mode])
        return runs[mode]

    return run_of


@pytest.fixture(params=list(MODES))
def shared(request: pytest.FixtureRequest, shared_runs: Callable[[str], SharedRun]) -> SharedRun:
    return shared_runs(request.param)


def scenario(name: str) -> tuple[str, str]:
    """A scenario's files: the bad one and its good neighbour."""
    return f"{name}.yaml", f"{name}_ok.yaml"


def test_an_agent_that_exits_or_raises_stop_iteration_fails_its_own_case(shared: SharedRun) -> None:
    shared.assert_outcomes(
        ("eval_good.yaml", *(f"{name}.yaml" for name in FAULTS)), passed=8, failed=2 * len(FAULTS)
    )
    printed = Counter(line.strip() for line in shared.lines)
    expected = Counter(
        f"✗ {message}" for *_, message in FAULTS.values() for _case in ("before", "bad")
    )
    assert {line: printed[line] for line in expected} == expected, shared.stdout
    for name in FAULTS:
        shared.shows(
            f"FAILED {name}.yaml::bad - Failed: case bad failed: the agent failed, nothing was "
            "checked (score 0.00)"
        )


def test_an_agent_class_that_cannot_be_created_fails_with_one_line(shared: SharedRun) -> None:
    shared.assert_outcomes(scenario("eval_broken"), passed=6, failed=2)
    message = (
        "eval_broken.yaml:1: agent 'fault_agents:Broken': could not be created: "
        "ValueError: no API key"
    )
    lines = [line for line in shared.lines if message in line and line.startswith("eval_broken")]
    assert lines == [f"{message} (fault_agents.py:61)"] * 2, shared.stdout
    printed = shared.text_of(*scenario("eval_broken"))
    assert "During handling" not in printed
    assert "Traceback" not in printed


@pytest.mark.parametrize("mode", MODES)
def test_a_keyboard_interrupt_from_an_agent_interrupts_the_run(
    faults: pytest.Pytester, mode: str
) -> None:
    faults.makefile(".yaml", eval_bad=bad_file("interrupts"), eval_good=good_file(8))
    # under -n, xdist reports the worker's interrupt ("node down: keyboard-interrupt") and may go on
    # with the others
    result = run(faults, mode, "--junitxml=junit.xml", ok_exit=(1, 2) if mode == "xdist" else (2,))
    result.stdout.fnmatch_lines(
        ["*keyboard-interrupt*" if mode == "xdist" else "*! KeyboardInterrupt !*"]
    )
    assert (faults.path / "junit.xml").exists()


def test_control_characters_reach_the_terminal_escaped(shared: SharedRun) -> None:
    shared.assert_outcomes(scenario("eval_retitle"), passed=6, failed=2)
    assert "\x1b" not in shared.stdout and "\x07" not in shared.stdout
    shared.shows("output: answer \\x1b]0;pwned\\x07 and \\x1b[2J done")
    shared.matcher.fnmatch_lines(["*bad: title \\x1b]0;pwned\\x07*"])


def test_deeply_nested_agent_data_shows_the_failure_reason(shared: SharedRun) -> None:
    shared.assert_outcomes(scenario("eval_deep"), passed=6, failed=2)
    assert "RecursionError" not in shared.stdout
    shared.shows("✗ tools_called: not called: search (score 0.00)")
    shared.matcher.fnmatch_lines(["*1. lookup(x={'x': {'x': *{...}*}) -> None"])


# A spinning agent at concurrency 1 runs in pytest's own thread: only pytest-timeout's --timeout
# stops it (README).
# Each in a run of its own: cases in flight beside other faults than these are not what this test
# pins.
@pytest.mark.parametrize(
    ("agent", "mode"),
    [(a, m) for a in ("blocks", "spins") for m in MODES if (a, m) != ("spins", "serial")],
)
def test_an_agent_that_blocks_the_event_loop_fails_alone_at_its_timeout(
    faults: pytest.Pytester, mode: str, agent: str
) -> None:
    good = good_file(6, ", timeout: 1").replace("fault_agents:good", "fault_agents:slow")
    faults.makefile(".yaml", eval_good=good, eval_bad=bad_file(agent, ", timeout: 1"))
    result = run(faults, mode)
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(
        ["*✗ agent blocked the event loop for * s (timeout of case bad: 1 s)"], consecutive=False
    )
    shows(result, "PASSED eval_good.yaml::good5")


def test_the_thread_of_a_loop_left_behind_to_a_spinning_agent_ends_with_the_session(
    faults: pytest.Pytester,
) -> None:
    """A spinning agent's loop, left behind, is stopped at the session's end, not at the exit.

    Left spinning, its thread met the interpreter's finalization (a crash at exit on Python 3.10).
    """
    faults.makeconftest(
        "import atexit, threading\n"
        "atexit.register(lambda: print('loops still running:', sum(\n"
        "    t.name == 'agent-eval-loop' and t.is_alive() for t in threading.enumerate())))\n"
    )
    faults.makefile(".yaml", eval_bad=bad_file("spins", ", timeout: 1"))
    result = run(faults, "concurrent", "-s")
    result.assert_outcomes(failed=2)  # each on a loop of its own: the first is left behind
    result.stdout.fnmatch_lines(["loops still running: 0"])


def test_a_blocked_loop_is_seen_while_waiting_for_a_case_without_a_timeout(
    faults: pytest.Pytester,
) -> None:
    """An agent blocking the loop fails at its own timeout; the cases behind it run again.

    The first case has no timeout and is still in flight when the next one's agent blocks the loop:
    the blocking agent fails at its own timeout, and the cases in flight behind it run again on a
    fresh loop (they used to fail with their own timeouts, which ran out while the loop was held).
    """
    first = (
        "agent: fault_agents:unhurried\ncases:\n"
        "  - {id: first, input: f, expect: {contains: [answer]}}\n"
    )
    blocker = "agent: fault_agents:blocks\ncases:\n  - {id: bad, input: b, timeout: 1}\n"
    good = good_file(6, ", timeout: 1").replace("fault_agents:good", "fault_agents:slow")
    faults.makefile(".yaml", eval_a_first=first, eval_b_blocks=blocker, eval_c_good=good)
    result = run(faults, "concurrent")
    result.assert_outcomes(passed=7, failed=1)
    shows(
        result,
        "PASSED eval_a_first.yaml::first",
        *(f"PASSED eval_c_good.yaml::good{i}" for i in range(6)),
    )
    result.stdout.fnmatch_lines(
        ["*✗ agent blocked the event loop for * s (timeout of case bad: 1 s)"]
    )
    output = (
        result.stdout.str() + result.stderr.str()
    )  # the left loop's cases end in their own tasks, quietly
    assert "Exception ignored" not in output and "was never awaited" not in output, output


def test_a_catastrophic_regex_fails_its_case_at_the_timeout(shared: SharedRun) -> None:
    shared.assert_outcomes(scenario("eval_regex"), passed=6, failed=2)
    shared.shows(
        "✗ regex: check regex did not finish within 1 s: the pattern /(a+)+$/ backtracks "
        "catastrophically on this output",
    )


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_an_agent_that_ends_its_worker_process_is_named_and_the_others_pass(
    faults: pytest.Pytester, concurrency: str
) -> None:
    good = good_file(8).replace("fault_agents:good", "fault_agents:sleepy")
    bad = "agent: fault_agents:ends_process\ncases:\n  - {id: bad, input: b}\n"
    faults.makefile(".yaml", eval_good=good, eval_bad=bad)
    result = run(faults, "xdist", "--agent-eval-concurrency", concurrency)
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed")) == (8, 1), result.stdout.str()
    shows(result, *(f"PASSED eval_good.yaml::good{i}" for i in range(8)))
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert [line.split(" - ")[0] for line in failed] == ["FAILED eval_bad.yaml::bad"], (
        result.stdout.str()
    )
    if concurrency != "1":
        result.stdout.fnmatch_lines(
            ["*crashed while running 'eval_bad.yaml::bad', the only case in flight on it*"]
        )
