"""Saved reports read back are data (SPEC §22): every field checked, exit 2, never a traceback.

Every field is checked by type and range wherever a report is read (``merge``, ``gate``,
``compare``, ``html``, ``--agent-eval-baseline``, ``--agent-eval-resume``), exit 2 with one line
naming the field's JSON path, never a traceback; the gate fails an empty run and a baseline sharing
no case.

Reports are written by real pytest runs (``pytester``), then edited as a hostile pull request would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.cli import main

AGENT = "def run(query, context):\n    return 'Paris' if 'capital' in query else 'no idea'\n"
SUITE = """\
agent: agent:run
cases:
  - {id: capital, input: capital of France?, expect: {contains: [Paris]}}
  - {id: river, input: longest river?, expect: {contains: [Nile]}}
"""


@pytest.fixture
def report(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(agent=AGENT)
    pytester.syspathinsert()
    (pytester.path / "eval_geo.yaml").write_text(SUITE)
    path = pytester.path / "report.json"
    pytester.runpytest("-p", "no:cacheprovider", f"--agent-eval-report={path}")
    assert len(json.loads(path.read_text())["cases"]) == 2
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def edited(path: Path, name: str, change: Callable[[dict[str, Any]], None]) -> Path:
    document = json.loads(path.read_text())
    change(document)
    target = path.with_name(name)
    target.write_text(json.dumps(document))
    return target


# -- the gate fails what it cannot judge
# -----------------------------------------------------------------------


def test_the_gate_fails_a_report_with_no_case_in_either_direction(
    report: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = edited(report, "empty.json", lambda d: d.update(cases=[]))
    code, out, _ = cli(capsys, "gate", str(empty), "--baseline", str(report))
    assert code == 1, out
    assert "no case in common with this run (this run has no case)" in out
    assert "the report has no case" in out
    code, out, _ = cli(capsys, "gate", str(report), "--baseline", str(empty))
    assert code == 1, out
    code, out, _ = cli(capsys, "gate", str(empty))
    assert code == 1, out
    assert "gate failed: the report has no case" in out


def test_the_gate_fails_a_baseline_sharing_no_case_in_either_direction(
    report: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def rename(document: dict[str, Any]) -> None:
        for case in document["cases"]:
            case["nodeid"] = (
                case["nodeid"]
                .replace("eval_geo.yaml", "eval_other.yaml")
                .replace("capital", "city")
            )

    other = edited(report, "other.json", rename)
    for cand, base in ((report, other), (other, report)):
        code, out, _ = cli(capsys, "gate", str(cand), "--baseline", str(base))
        assert code == 1, out
        assert "no case in common" in out


# -- every field of its type and range
# -------------------------------------------------------------------------


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        node: Any = document
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return change


BAD_FIELDS = [
    (("cases", 0, "cost"), -0.5, "cases[0].cost: -0.5 is less than the minimum of 0"),
    (
        ("cases", 0, "cost"),
        10**400,
        "cases[0].cost: an integer of 401 digits, larger than any float",
    ),
    (("cases", 0, "score"), -3, "cases[0].score: -3 is less than the minimum of 0"),
    (("cases", 0, "score"), 1e308, "cases[0].score: 1e+308 is greater than the maximum of 1"),
    (
        ("cases", 1, "latency_s"),
        "fast",
        "cases[1].latency_s: 'fast' is not of type 'number', 'null'",
    ),
    (("run",), "yesterday", "run: 'yesterday' is not of type 'object'"),
    (("run", "duration_s"), "long", "run.duration_s: 'long' is not of type 'number'"),
    (
        ("cases", 0, "trials", 0, "cost"),
        -1,
        "cases[0].trials[0].cost: -1 is less than the minimum of 0",
    ),
]


@pytest.mark.parametrize(
    ("where", "value", "message"), BAD_FIELDS, ids=[m.split(":")[0] for _, _, m in BAD_FIELDS]
)
@pytest.mark.parametrize("command", ["gate", "compare", "html", "merge", "gate-baseline"])
def test_a_field_of_the_wrong_type_or_range_is_exit_2_naming_its_path(
    report: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    where: tuple[str | int, ...],
    value: Any,
    message: str,
) -> None:
    bad = edited(report, "bad.json", _set(where, value))
    argv = {
        "gate": ["gate", str(bad), "--max-cost", "1"],
        "gate-baseline": ["gate", str(report), "--baseline", str(bad)],
        "compare": ["compare", str(report), str(bad)],
        "html": ["html", str(bad), "-o", str(report.with_name("page.html"))],
        "merge": ["merge", str(report), str(bad), "-o", str(report.with_name("merged.json"))],
    }[command]
    code, _, err = cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(bad) in lines[0], err


def test_a_bad_baseline_or_resume_report_is_one_line_naming_the_field(
    report: Path, pytester: pytest.Pytester
) -> None:
    bad = edited(report, "bad.json", _set(("cases", 0, "score"), -3))
    for option in ("--agent-eval-baseline", "--agent-eval-resume"):
        result = pytester.runpytest("-p", "no:cacheprovider", option, str(bad))
        text = result.stdout.str() + result.stderr.str()
        assert "cases[0].score: -3 is less than the minimum of 0" in text, text
        assert "Traceback" not in text


JOURNAL_FIELDS = [(where[2:], value, message.split(".", 1)[1])
                  for where, value, message in BAD_FIELDS if where[0] == "cases"]  # fmt: skip
"""The case fields of :data:`BAD_FIELDS` as a journal line holds them (the record itself:
``score``).
"""


def _bad_journal(report: Path, where: tuple[str | int, ...], value: Any) -> Path:
    """The run's journal (``report.json.journal.jsonl``) with its line 3 (a case record) edited."""
    journal = report.with_name(report.name + ".journal.jsonl")
    lines = journal.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["journal"] == 1 and json.loads(lines[2])["nodeid"]
    record = json.loads(lines[2])
    _set(where, value)(record)
    lines[2] = json.dumps(record)
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return journal


@pytest.mark.parametrize(
    ("where", "value", "message"),
    JOURNAL_FIELDS,
    ids=[m.split(":")[0] for _, _, m in JOURNAL_FIELDS],
)
def test_a_journal_line_of_the_wrong_type_or_range_is_exit_2_naming_its_line_and_path(
    report: Path,
    capsys: pytest.CaptureFixture[str],
    where: tuple[str | int, ...],
    value: Any,
    message: str,
) -> None:
    journal = _bad_journal(report, where, value)
    code, _, err = cli(capsys, "report", str(journal), "-o", str(report.with_name("rebuilt.json")))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{journal}:3: {message}" in lines[0], err
    assert not report.with_name("rebuilt.json").exists()


def test_a_bad_journal_line_is_a_resume_usage_error_naming_its_line_and_path(
    report: Path, pytester: pytest.Pytester
) -> None:
    journal = _bad_journal(report, ("score",), 1e308)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--agent-eval-resume={journal}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert (
        f"--agent-eval-resume: {journal}:3: score: 1e+308 is greater than the maximum of 1" in text
    ), text
    assert "Traceback" not in text


def test_a_report_the_run_wrote_reads_back_clean(
    report: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "html", str(report), "-o", str(report.with_name("page.html")))[0] == 0
    assert cli(capsys, "compare", str(report), str(report))[0] == 0
    assert (
        cli(capsys, "gate", str(report), "--baseline", str(report))[0] == 0
    )  # a known failure: no regression


# -- what the terminal shows, what a collection writes
# ---------------------------------------------------------


def test_control_characters_in_ids_are_shown_escaped(
    report: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def plant(document: dict[str, Any]) -> None:
        document["cases"][0]["nodeid"] += "\x1b]0;owned\x07\x1b[2J"
        document["cases"][0]["outcome"] = "failed"

    hostile = edited(report, "hostile.json", plant)
    for argv in (
        ["compare", str(hostile), str(report)],
        ["gate", str(report), "--baseline", str(hostile)],
    ):
        _, out, err = cli(capsys, *argv)
        assert "\x1b" not in out + err and "\x07" not in out + err
        assert "\\x1b]0;owned\\x07" in out


def test_collect_only_writes_no_report_and_prints_no_eval_summary(
    report: Path, pytester: pytest.Pytester
) -> None:
    before = report.read_text()
    html = report.with_name("page.html")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--collect-only",
        "-q",
        f"--agent-eval-report={report}",
        f"--agent-eval-html={html}",
    )
    assert result.ret == 0
    assert (
        report.read_text() == before
    )  # the last real run's report, which resume and the gate need
    assert not html.exists()
    assert "agent eval summary" not in result.stdout.str()
    assert "not run" not in result.stdout.str()
    result.stdout.fnmatch_lines(["eval_geo.yaml::capital", "eval_geo.yaml::river"])


@pytest.mark.parametrize("k", ["0", "-1"])
def test_agent_eval_k_below_1_is_a_usage_error(pytester: pytest.Pytester, k: str) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", f"--agent-eval-k={k}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--agent-eval-k must be at least 1, got {k}*"])


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["inprocess", "xdist"])
@pytest.mark.parametrize("renamed", ["ids", "files"])
def test_resume_refuses_the_report_of_another_suite(
    report: Path, pytester: pytest.Pytester, mode: list[str], renamed: str
) -> None:
    if mode and renamed == "ids":
        pytest.skip(
            "under xdist the controller collects nothing: it tells another suite by its files"
        )

    def rename(document: dict[str, Any]) -> None:
        for case in document["cases"]:
            case["nodeid"] = case["nodeid"].replace("eval_geo.yaml", "eval_elsewhere.yaml")
            if renamed == "files":
                case["file"] = "eval_elsewhere.yaml"

    foreign = edited(report, "foreign.json", rename)
    before = report.read_text()
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        *mode,
        f"--agent-eval-resume={foreign}",
        f"--agent-eval-report={report}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agent-eval-resume: *foreign.json is the report of another suite*"]
    )
    assert report.read_text() == before  # no report written over the last real run's
    ours = pytester.runpytest("-p", "no:cacheprovider", *mode, f"--agent-eval-resume={report}")
    assert ours.ret == 0  # every case has a final record: nothing to run


def test_a_duplicate_promptfoo_description_says_to_change_the_description(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "provider.py").write_text(
        "def call_api(prompt, options, context):\n    return {'output': prompt}\n"
    )
    (pytester.path / "promptfooconfig.yaml").write_text(
        "prompts: ['{{ q }}']\nproviders: [file://provider.py]\n"
        "tests:\n  - {description: same, vars: {q: a}}\n  - {description: same, vars: {q: b}}\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.stdout.fnmatch_lines(
        ["*duplicate case id 'same' (first at line 4); give each case a unique `description`*"]
    )
    assert "unique `id`" not in result.stdout.str()


# -- an interrupt under -n 2 keeps every finished case
# ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_an_interrupt_of_the_whole_process_group_under_xdist_keeps_every_finished_case(
    pytester: pytest.Pytester, name: str
) -> None:
    """Ctrl-C in a terminal signals the whole process group (controller, workers), as CI cancels."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pytester.makepyfile(
        agent="import time\n\ndef run(query, context):\n    "
        "time.sleep(context['sleep'])\n    return 'hi'\n"
    )
    pytester.makeconftest(
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' and 'fast3' in report.nodeid and not "
        "hasattr(report, 'node'):\n"
        "        open('fast-done', 'w').close()\n"
    )
    cases = "".join(f"  - {{id: fast{n}, input: hi, context: {{sleep: 0}}}}\n" for n in range(4))
    cases += "".join(f"  - {{id: slow{n}, input: hi, context: {{sleep: 120}}}}\n" for n in range(3))
    (pytester.path / "eval_run.yaml").write_text(f"agent: agent:run\ncases:\n{cases}")
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--agent-eval-report",
        "r.json",
    ]
    env = {**os.environ, "PYTHONPATH": str(pytester.path)}
    proc = subprocess.Popen(
        args,
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while (
            not (pytester.path / "fast-done").exists()
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        time.sleep(0.5)  # the last fast case's report reaches the controller
        os.killpg(proc.pid, getattr(signal, name))
        output = proc.communicate(timeout=90)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "INTERNALERROR" not in output, output
    report = json.loads((pytester.path / "r.json").read_text())
    assert {c["nodeid"] for c in report["cases"]} >= {
        f"eval_run.yaml::fast{n}" for n in range(4)
    }, output
    assert report["run"]["finished"] is False
