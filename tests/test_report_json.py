"""``--agent-eval-report PATH``: the JSON report, its shipped schema, what it holds after Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from report_support import BROKEN, SUITE, UNREADABLE, USAGE_AGENT

import pytest_agent_eval
from pytest_agent_eval.report.json_report import redacted
from pytest_agent_eval.report.schema import report_schema


def _load(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    return report


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makefile(".yaml", eval_suite=SUITE, eval_broken=BROKEN, eval_unreadable=UNREADABLE)
    return pytester


def test_the_report_holds_the_run_and_every_case(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "gpt-test")
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-report", "out/r.json"
    )
    result.stdout.fnmatch_lines(["*- agent eval report: out/r.json -*"])
    report = _load(suite.path / "out" / "r.json")
    run = report["run"]
    assert run["args"][-6:] == [
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--agent-eval-report",
        "out/r.json",
    ]
    assert run["llm_model"] == "gpt-test"
    assert run["plugin_version"] == pytest_agent_eval.__version__
    assert run["pytest_version"] == pytest.__version__
    assert run["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert (run["finished"], run["exit_status"]) == (True, 1)
    assert run["git_commit"] is None  # the pytester directory is no git checkout
    assert run["duration_s"] > 0
    outcomes = {c["nodeid"]: c["outcome"] for c in report["cases"]}
    assert len(outcomes) == 11
    assert outcomes["eval_suite.yaml::flaky"] == "passed"
    assert outcomes["eval_unreadable.yaml::@file"] == "error"
    assert [c["nodeid"] for c in report["cases"]] == sorted(outcomes)
    assert not list((suite.path / "out").glob("*.tmp"))
    lines = (
        (suite.path / "out" / "r.json").read_text().splitlines()
    )  # a line per case: a diff names the cases
    assert [
        json.loads(line.strip().rstrip(","))["nodeid"] for line in lines if '"nodeid"' in line
    ] == sorted(outcomes)


def test_the_report_names_the_git_commit_and_hides_secrets(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makefile(".yaml", eval_one="agent: usage_agent:run\ncases: [{id: a, input: hi}]\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run([*git, *cmd], cwd=pytester.path, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pytester.path, capture_output=True, text=True
    ).stdout
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--agent-eval-report=r.json", "-o", "openai_api_key=sk-live-123"
    )
    result.assert_outcomes(passed=1)
    report = _load(pytester.path / "r.json")
    assert report["run"]["git_commit"] == head.strip()
    assert "sk-live-123" not in (pytester.path / "r.json").read_text()
    assert report["run"]["args"][-1] == "openai_api_key=***"


def test_secret_looking_option_values_are_redacted() -> None:
    assert redacted(
        ["--api-key", "s1", "--token=s2", "-o", "auth_header=s3", "-k", "key_case", "x"]
    ) == [
        "--api-key", "***", "--token=***", "-o", "auth_header=***", "-k", "key_case", "x",
    ]  # fmt: skip


def test_agent_eval_schema_report_prints_the_shipped_schema(pytester: pytest.Pytester) -> None:
    result = pytester.run("agent-eval", "schema", "--report")
    assert result.ret == 0
    assert json.loads(result.stdout.str()) == report_schema()
    shipped = Path(pytest_agent_eval.__file__).parent / "report" / "report.schema.json"
    assert json.loads(shipped.read_text()) == report_schema()


SLOW_SUITE_CONFTEST = """
import os
import re

WORKER = False
DONE = set()

def pytest_configure(config):
    global WORKER
    WORKER = hasattr(config, "workerinput")

def pytest_runtest_logreport(report):
    if WORKER or report.when != "call" or "::fast" not in report.nodeid:
        return
    DONE.add(report.nodeid)
    if len(DONE) == 2:  # the fast cases are reported on the controller: the test may interrupt now
        open("fast-cases-reported", "w").close()
"""


@pytest.mark.parametrize(
    "mode", [["--agent-eval-concurrency", "8"], ["-n", "2"]], ids=["concurrency8", "xdist"]
)
def test_an_interrupted_run_leaves_a_valid_report_of_what_finished(
    pytester: pytest.Pytester, mode: list[str]
) -> None:
    pytester.makepyfile(usage_agent=USAGE_AGENT, conftest=SLOW_SUITE_CONFTEST)
    fast = "".join(f"  - {{id: fast{n}, input: hi, context: {{say: hello}}}}\n" for n in range(2))
    slow = "".join(f"  - {{id: slow{n}, input: hi, context: {{sleep: 120}}}}\n" for n in range(6))
    pytester.makefile(".yaml", eval_run=f"agent: usage_agent:run\ncases:\n{fast}{slow}")
    marker = pytester.path / "fast-cases-reported"
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--agent-eval-report",
        "r.json",
        *mode,
    ]
    proc = subprocess.Popen(
        args,
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), (
            proc.communicate(timeout=5)[0].decode() if proc.poll() is not None else "no marker"
        )
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
        output = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 2, output
    report = _load(pytester.path / "r.json")
    assert report["run"]["finished"] is False
    assert report["run"]["exit_status"] == 2
    assert {c["nodeid"]: c["outcome"] for c in report["cases"]} == {
        "eval_run.yaml::fast0": "passed",
        "eval_run.yaml::fast1": "passed",
    }


def test_a_run_stopped_by_x_reports_what_finished(suite: pytest.Pytester) -> None:
    result = suite.runpytest(
        "-p", "no:cacheprovider", "-x", "--agent-eval-report", "r.json", "eval_suite.yaml"
    )
    result.assert_outcomes(passed=1, failed=1)
    report = _load(suite.path / "r.json")
    assert (report["run"]["finished"], report["run"]["exit_status"]) == (False, 1)
    assert {c["nodeid"]: c["outcome"] for c in report["cases"]} == {
        "eval_suite.yaml::ok": "passed",
        "eval_suite.yaml::bad": "failed",
    }


def test_a_crashed_xdist_worker_leaves_a_report_of_the_other_cases(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    cases = "".join(f"  - {{id: ok{n}, input: hi, context: {{say: hello}}}}\n" for n in range(4))
    pytester.makefile(
        ".yaml",
        eval_w="agent: usage_agent:run\ncases:\n"
        f"{cases}  - {{id: dies, input: hi, context: {{crash: true}}}}\n",
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-report", "r.json"
    )
    result.assert_outcomes(passed=4, failed=1)  # xdist reports the crash as the item's failure
    report = _load(pytester.path / "r.json")
    assert report["run"]["finished"] is True
    assert {c["nodeid"]: c["outcome"] for c in report["cases"]} == {
        **{f"eval_w.yaml::ok{n}": "passed" for n in range(4)},
        "eval_w.yaml::dies": "error",
    }
    dies = next(c for c in report["cases"] if c["case_id"] == "dies")
    assert (dies["file"], dies["line"], dies["trials"]) == ("eval_w.yaml", 7, [])
    assert re.fullmatch(r"worker 'gw\d' crashed while running 'eval_w.yaml::dies'", dies["error"])
    jsonschema.validate(report, report_schema())


def _timeless(value: Any) -> Any:
    """The report's cases with what is measured (latency, duration) taken out."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in ("latency_s", "duration_s")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_the_report_is_the_same_with_and_without_xdist(suite: pytest.Pytester) -> None:
    suite.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "serial.json")
    suite.runpytest("-p", "no:cacheprovider", "-n", "2", "--agent-eval-report", "xdist.json")
    serial, xdist = _load(suite.path / "serial.json"), _load(suite.path / "xdist.json")
    assert len(serial["cases"]) == 11
    assert _timeless(xdist["cases"]) == _timeless(serial["cases"])
    assert (xdist["run"]["exit_status"], xdist["run"]["finished"]) == (
        serial["run"]["exit_status"],
        True,
    )


SESSION_ERROR_CONFTEST = """
def pytest_runtest_logfinish(nodeid):
    if nodeid.endswith("::bad"):
        raise RuntimeError("a plugin broke the session")
"""


def test_a_session_level_error_leaves_a_report_of_what_finished(suite: pytest.Pytester) -> None:
    suite.makeconftest(SESSION_ERROR_CONFTEST)
    result = suite.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-report", "r.json", "eval_suite.yaml"
    )
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    report = _load(suite.path / "r.json")
    assert (report["run"]["finished"], report["run"]["exit_status"]) == (False, 3)
    assert {c["nodeid"]: c["outcome"] for c in report["cases"]} == {
        "eval_suite.yaml::ok": "passed",
        "eval_suite.yaml::bad": "failed",
    }
