"""The reports hold under bad data, faults and signals (issue 27).

Agent text that cannot be encoded, numbers that are not finite, a run stopped by SIGTERM, report
paths that are not regular files, malformed baselines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from report_support import USAGE_AGENT

RUN = ("-p", "no:cacheprovider")

ODD_AGENT = '''
def cut_emoji(query, context):
    """An LLM reply cut inside an emoji: a lone surrogate."""
    return {"output": "half a smile \\ud83d and more", "tools_called": []}

def nan_cost(query, context):
    return {"output": "hello", "usage": {"prompt_tokens": 1, "completion_tokens": 1, \
"cost": float("nan")}}

def inject(query, context):
    return {"output": "<img src=x onerror=alert(1)> [click](http://evil.example) | # heading"}

def inject_error(query, context):
    raise RuntimeError("<img src=x onerror=alert(1)> [click](http://evil.example) | # heading")

def nan_check(run):
    return float("nan")

def inf_check(run):
    return float("inf")
'''


def _project(pytester: pytest.Pytester, cases: str) -> pytest.Pytester:
    pytester.makepyfile(odd_agents=ODD_AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_odd=cases)
    return pytester


def _load(path: Path) -> dict[str, Any]:
    def no_constant(name: str) -> None:
        raise AssertionError(f"not JSON: bare {name}")

    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"), parse_constant=no_constant)
    return data


REPORTS = (
    "--agent-eval-report",
    "r.json",
    "--agent-eval-markdown",
    "s.md",
    "--agent-eval-html",
    "r.html",
)


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["inprocess", "xdist"])
def test_item5_a_lone_surrogate_in_the_output_loses_no_report(
    pytester: pytest.Pytester, mode: list[str]
) -> None:
    _project(
        pytester,
        "agent: odd_agents:cut_emoji\ncases:\n"
        "  - {id: cut, input: hi, expect: {contains: [smile]}}\n"
        "  - {id: other, input: hi, expect: {contains: [nothing]}}\n",
    )
    result = pytester.runpytest_subprocess(*RUN, *REPORTS, *mode)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, failed=1)
    report = _load(pytester.path / "r.json")
    cases = {c["case_id"]: c for c in report["cases"]}
    assert cases["cut"]["output"] == "half a smile \ufffd and more"
    assert "agent eval summary" in (pytester.path / "s.md").read_text(encoding="utf-8")
    assert "half a smile" in (pytester.path / "r.html").read_text(encoding="utf-8")


def test_item6_a_nan_cost_is_unknown_and_never_passes_the_cost_gate(
    pytester: pytest.Pytester,
) -> None:
    _project(
        pytester,
        "agent: odd_agents:nan_cost\ncases:\n  - {id: c, input: hi, expect: {contains: [hello]}}\n",
    )
    result = pytester.runpytest(*RUN, *REPORTS, "--agent-eval-max-cost", "1")
    result.stdout.fnmatch_lines(["*agent_eval_max_cost: no cost reported*"])
    report = _load(pytester.path / "r.json")
    assert report["cases"][0]["cost"] is None
    assert "<td" in (pytester.path / "r.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("check", ["nan_check", "inf_check"])
def test_item6_a_check_scoring_nan_or_inf_has_no_verdict_and_every_report_is_written(
    pytester: pytest.Pytester, check: str
) -> None:
    _project(
        pytester,
        "agent: odd_agents:inject\ncases:\n"
        f"  - {{id: c, input: hi, expect: {{custom: odd_agents:{check}}}}}\n",
    )
    result = pytester.runpytest(*RUN, *REPORTS)
    assert "INTERNALERROR" not in result.stdout.str()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no verdict*not a finite number*"])
    report = _load(pytester.path / "r.json")
    assert report["cases"][0]["score"] is None
    assert (pytester.path / "s.md").is_file() and (pytester.path / "r.html").is_file()


def test_item4_agent_text_in_the_markdown_summary_is_escaped(pytester: pytest.Pytester) -> None:
    _project(
        pytester,
        "agent: odd_agents:inject_error\ncases:\n"
        "  - {id: c, input: hi, expect: {contains: [absent]}}\n",
    )
    pytester.runpytest(*RUN, "--agent-eval-markdown", "s.md").assert_outcomes(failed=1)
    text = (pytester.path / "s.md").read_text(encoding="utf-8")
    assert "<img" not in text and "[click](" not in text
    assert "&lt;img src=x onerror=alert(1)>" in text
    failures = [line for line in text.splitlines() if line.startswith("| `eval_odd.yaml::c`")]
    assert (
        len(failures) == 1 and failures[0].count(" | ") == 3
    )  # the agent's pipe does not add a column


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["inprocess", "xdist"])
def test_item7_sigterm_is_treated_as_ctrl_c_and_every_report_is_written(
    pytester: pytest.Pytester, mode: list[str]
) -> None:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makeconftest(
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' and 'fast' in report.nodeid and not "
        "hasattr(report, 'node'):\n"
        "        open('fast-done', 'w').close()\n"
    )
    cases = "  - {id: fast, input: hi, context: {say: hello}}\n" + "".join(
        f"  - {{id: slow{n}, input: hi, context: {{sleep: 120}}}}\n" for n in range(3)
    )
    pytester.makefile(".yaml", eval_run=f"agent: usage_agent:run\ncases:\n{cases}")
    args = [sys.executable, "-m", "pytest", *RUN, *REPORTS, *mode]
    env = {**os.environ, "PYTHONPATH": str(pytester.path)}
    proc = subprocess.Popen(
        args, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    try:
        deadline = time.monotonic() + 60
        marker = pytester.path / "fast-done"
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), (
            proc.communicate(timeout=5)[0].decode() if proc.poll() is not None else "no marker"
        )
        time.sleep(0.3)  # the fast case's report reaches the controller
        proc.send_signal(
            signal.SIGTERM
        )  # as CI, `timeout` and Kubernetes stop a job: the main process only
        output = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, output
    assert "INTERNALERROR" not in output
    report = _load(pytester.path / "r.json")
    assert report["run"]["finished"] is False
    assert "eval_run.yaml::fast" in [c["nodeid"] for c in report["cases"]]
    assert "was interrupted" in (pytester.path / "s.md").read_text(encoding="utf-8")
    assert (pytester.path / "r.html").is_file()


# -- report paths
# --------------------------------------------------------------------------------------------------

OK_SUITE = "agent: odd_agents:inject\ncases:\n  - {id: c, input: hi, expect: {contains: [img]}}\n"


def test_item8_a_report_path_that_is_a_symlink_is_written_through(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, OK_SUITE)
    (pytester.path / "out").mkdir()
    (pytester.path / "r.json").symlink_to(pytester.path / "out" / "real.json")
    pytester.runpytest(*RUN, "--agent-eval-report", "r.json").assert_outcomes(passed=1)
    assert (pytester.path / "r.json").is_symlink()
    assert _load(pytester.path / "out" / "real.json")["cases"][0]["case_id"] == "c"


def test_item8_a_report_path_that_is_a_fifo_or_device_is_not_replaced(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, OK_SUITE)
    os.mkfifo(pytester.path / "r.json")
    (pytester.path / "null.html").symlink_to("/dev/null")
    result = pytester.runpytest(
        *RUN, "--agent-eval-report", "r.json", "--agent-eval-html", "null.html"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert Path(pytester.path / "r.json").is_fifo()
    assert os.path.realpath(pytester.path / "null.html") == "/dev/null"
    result.stdout.fnmatch_lines(["*agent eval report not written: *r.json is a FIFO*"])


def test_item8_a_report_that_cannot_be_written_is_one_line_and_the_others_are_written(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester, OK_SUITE)
    (pytester.path / "taken").write_text("a file, not a folder")
    result = pytester.runpytest(
        *RUN, "--agent-eval-report", "taken/r.json", "--agent-eval-markdown", "s.md"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    lines = [line for line in result.stdout.lines if "not written" in line]
    assert len(lines) == 1 and "taken/r.json" in lines[0], result.stdout.str()
    assert "agent eval summary" in result.stdout.str()
    assert (pytester.path / "s.md").is_file()
    # the journal beside the report cannot be written either: it goes where it goes without a report
    result.stdout.fnmatch_lines(
        ["agent eval journal: taken/r.json.journal.jsonl: *; written to *.jsonl instead"]
    )
    (journal,) = (pytester.path / ".agent-eval" / "journal").glob("*.jsonl")
    assert '"nodeid": "eval_odd.yaml::c"' in journal.read_text()


# -- malformed baselines and saved reports
# ---------------------------------------------------------------------------

GOOD_CASE = {
    "nodeid": "eval_odd.yaml::c",
    "case_id": "c",
    "file": "eval_odd.yaml",
    "line": 3,
    "outcome": "passed",
}
MALFORMED: dict[str, Any] = {
    "nodeid_not_a_string": {"schema_version": 1, "run": {}, "cases": [{**GOOD_CASE, "nodeid": 5}]},
    "trials_not_a_list": {"schema_version": 1, "run": {}, "cases": [{**GOOD_CASE, "trials": "x"}]},
    "score_a_string": {"schema_version": 1, "run": {}, "cases": [{**GOOD_CASE, "score": "high"}]},
    "cases_not_a_list": {"schema_version": 1, "run": {}, "cases": 3},
    "bare_nan": '{"schema_version": 1, "run": {}, "cases": [{"nodeid": "a::b", "case_id": "b", '
    '"file": "a", "line": 1, "outcome": "passed", "score": NaN}]}',
    "not_utf8": b'{"schema_version": 1, "cases": ["\xff"]}',
}


def _write(path: Path, value: Any) -> None:
    if isinstance(value, bytes):
        path.write_bytes(value)
    else:
        path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_item9_a_malformed_baseline_is_one_line_and_the_reports_are_written(
    pytester: pytest.Pytester, name: str
) -> None:
    _project(pytester, OK_SUITE)
    _write(pytester.path / "base.json", MALFORMED[name])
    result = pytester.runpytest(
        *RUN, "--agent-eval-baseline", "base.json", "--agent-eval-report", "r.json"
    )
    assert "Traceback" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*base.json*"])
    assert _load(pytester.path / "r.json")["cases"][0]["case_id"] == "c"


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("command", ["compare", "html"])
def test_item9_agent_eval_compare_and_html_give_a_clean_error_on_malformed_reports(
    tmp_path: Path, name: str, command: str
) -> None:
    from pytest_agent_eval.cli import main

    bad = tmp_path / "bad.json"
    _write(bad, MALFORMED[name])
    good = tmp_path / "good.json"
    _write(good, {"schema_version": 1, "run": {}, "cases": [GOOD_CASE]})
    argv = (
        ["compare", str(good), str(bad)]
        if command == "compare"
        else ["html", str(bad), "-o", str(tmp_path / "x")]
    )
    assert main(argv) == 2


# -- the cache directory
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra", [[], ["--agent-eval-rate-limit", "100/s"]], ids=["plain", "rate_limit"]
)
def test_item10_an_unwritable_cache_directory_costs_speed_only(
    pytester: pytest.Pytester, extra: list[str]
) -> None:
    _project(pytester, OK_SUITE)
    (pytester.path / "not_a_folder").write_text("pytest's cache_dir points at a file")
    pytester.makeini("[pytest]\ncache_dir = not_a_folder\n")
    result = pytester.runpytest(*extra)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)


# -- the task scorer
# --------------------------------------------------------------------------------------------------


def test_item19_a_task_scorer_reply_with_two_scores_for_one_task_is_unreadable() -> None:
    from pytest_agent_eval.conversation.scoring import ScorerReplyError, read_task_scores
    from pytest_agent_eval.core.conversation import SimulatedUser, Task

    user = SimulatedUser(tasks=(Task("Ask A", "a"), Task("Ask B", "b")))
    reply = json.dumps(
        {
            "tasks": [
                {"scored": "Ask A", "score": 0.1},
                {"scored": "Ask B", "score": 1},
                {"scored": "ask a", "score": 1},
            ]
        }
    )
    with pytest.raises(
        ScorerReplyError, match=r"task scorer reply unreadable.*two different scores for task 1"
    ):
        read_task_scores(reply, user)


def test_a_sessions_secrets_are_forgotten_when_it_ends(pytester: pytest.Pytester) -> None:
    """Secrets scrubbed by value are the session's own: a later session shows its own text whole.

    A later session in the same process (pytest.main again, pytester's in-process runs) shows its
    own text whole, such as a case id that equals an earlier run's key.
    """
    from pytest_agent_eval.secrets import scrub_text

    pytester.makeconftest(
        "from pytest_agent_eval import secrets\n\ndef pytest_configure(config):\n"
        "    secrets.remember('unused')\n"
    )
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert scrub_text("case own_unused") == "case own_unused"
