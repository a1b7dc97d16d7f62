"""One run over many CI jobs (SPEC §18, issue 28): shards, merge, gate and resume.

``--agent-eval-shard I/N`` runs a deterministic 1/N of the items, ``agent-eval merge`` joins the
shards' reports, ``agent-eval gate`` judges the merged report, and ``--agent-eval-resume REPORT``
runs the cases a report has no final record of.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_agent_eval.cli import main
from pytest_agent_eval.report.schema import report_schema

AGENT = """\
import os

def run(query, context):
    if context.get("flip") and os.environ.get("FLIP"):
        return "nope"
    return context.get("say", "ok")
"""
CASES = "agent: shard_agent:run\ncases:\n" + "".join(
    f"  - {{id: c{i:02d}, input: hi, context: {{flip: {str(i == 3).lower()}}}, expect: "
    "{contains: [ok]}}\n"
    for i in range(12)
)
PLAIN = "def test_plain():\n    pass\n"
RUN = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rA")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(shard_agent=AGENT, test_plain=PLAIN)
    pytester.makefile(".yaml", eval_cases=CASES)
    return pytester


def _load(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    return report


def _ids(report: dict[str, Any]) -> list[str]:
    return [case["nodeid"] for case in report["cases"]]


def _ran(result: pytest.RunResult) -> set[str]:
    return {
        line.split()[1]
        for line in result.outlines
        if line.startswith(("PASSED ", "FAILED ", "ERROR "))
    }


def _shards(project: pytest.Pytester, *extra: str) -> list[Path]:
    paths = []
    for i in (1, 2, 3):
        path = project.path / f"shard{i}.json"
        project.runpytest(
            *RUN, "--agent-eval-shard", f"{i}/3", "--agent-eval-report", str(path), *extra
        )
        paths.append(path)
    return paths


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- 1. shards
# --------------------------------------------------------------------------------------------------


def test_shards_split_the_items_into_disjoint_parts_recorded_in_each_report(
    project: pytest.Pytester,
) -> None:
    ran: list[set[str]] = []
    total_selected = 0
    for i in (1, 2, 3):
        path = project.path / f"s{i}.json"
        result = project.runpytest(
            *RUN, "--agent-eval-shard", f"{i}/3", "--agent-eval-report", str(path)
        )
        shard = _load(path)["run"]["shard"]
        assert shard["index"] == i and shard["count"] == 3 and shard["collected"] == 13
        outcomes = result.parseoutcomes()
        assert outcomes.get("deselected") == 13 - shard["selected"]  # as pytest's own -k deselects
        assert shard["selected"] == len(_ran(result))
        ran.append(_ran(result))
        total_selected += shard["selected"]
    assert total_selected == 13
    assert set().union(*ran) == {f"eval_cases.yaml::c{i:02d}" for i in range(12)} | {
        "test_plain.py::test_plain"
    }
    assert sum(len(r) for r in ran) == 13  # no item in two shards
    assert all(3 <= len(r) <= 5 for r in ran)  # balanced


def test_the_shard_of_an_item_does_not_depend_on_the_hash_seed(project: pytest.Pytester) -> None:
    chosen = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *RUN,
                "--agent-eval-shard",
                "2/3",
                "--collect-only",
                "-q",
            ],
            cwd=project.path,
            env=env,
            capture_output=True,
            text=True,
        )
        chosen.append([line for line in done.stdout.splitlines() if "::" in line])
    assert chosen[0] and chosen[0] == chosen[1]


@pytest.mark.parametrize("value", ["0/3", "4/3", "x", "1/0", "2"])
def test_a_bad_shard_is_a_usage_error(project: pytest.Pytester, value: str) -> None:
    result = project.runpytest(*RUN, f"--agent-eval-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*error: argument --agent-eval-shard: '{value}': give I/N*1 <= I <= N*"]
    )


def test_shards_apply_after_k_and_with_xdist(project: pytest.Pytester) -> None:
    ran = set()
    for i in (1, 2):
        path = project.path / f"k{i}.json"
        result = project.runpytest_subprocess(
            *RUN,
            "-n",
            "2",
            "-k",
            "c0",
            "--agent-eval-shard",
            f"{i}/2",
            "--agent-eval-report",
            str(path),
        )
        shard = _load(path)["run"]["shard"]
        assert shard["collected"] == 10  # c00..c09: what -k left
        assert shard["selected"] == len(_ids(_load(path))) == len(_ran(result))
        ran |= _ran(result)
    assert ran == {f"eval_cases.yaml::c{i:02d}" for i in range(10)}


# -- 2. merge
# --------------------------------------------------------------------------------------------------


def test_merge_joins_the_shards_and_html_and_compare_take_the_merged_report(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _shards(project)
    merged = project.path / "all.json"
    code, out, err = _cli(capsys, "merge", *map(str, paths), "-o", str(merged))
    assert code == 0, err
    report = _load(merged)
    assert sorted(_ids(report)) == _ids(report) == [f"eval_cases.yaml::c{i:02d}" for i in range(12)]
    run = report["run"]
    assert run["finished"] is True and run.get("missing_shards", []) == []
    assert [r["shard"]["index"] for r in run["merged_from"]] == [1, 2, 3]
    assert sum(r["shard"]["selected"] for r in run["merged_from"]) == 13
    assert "12 cases from 3 reports" in out
    code, out, err = _cli(
        capsys, "html", str(merged), str(paths[0]), "-o", str(project.path / "all.html")
    )
    assert code == 0, err
    assert "c11" in (project.path / "all.html").read_text()
    code, out, err = _cli(capsys, "compare", str(paths[0]), str(merged))
    assert code == 0, err
    assert "new" in out


def test_merge_refuses_a_duration_no_float_holds_naming_the_field(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard whose ``run.duration_s`` is too large for a float: exit 2, one line, no merge.

    A hand-edited or damaged report's integer too large for a float is exit 2 with one line naming
    the field (SPEC §22: every field of a report read back of its type and range), not a traceback,
    and no merged report.
    """
    paths = _shards(project)
    damaged = _load(paths[0])
    damaged["run"]["duration_s"] = 10**400
    paths[0].write_text(json.dumps(damaged))
    merged = project.path / "all.json"
    code, _, err = _cli(capsys, "merge", *map(str, paths), "-o", str(merged))
    assert code == 2
    assert (
        err.count("\n") == 1
        and f"{paths[0]}" in err
        and "run.duration_s: an integer of 401 digits" in err
    )
    assert not merged.exists()


def test_merge_refuses_a_case_present_twice(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _shards(project)
    copy = project.path / "again.json"
    copy.write_text(paths[1].read_text())
    code, _, err = _cli(
        capsys, "merge", *map(str, paths), str(copy), "-o", str(project.path / "all.json")
    )
    assert code == 2
    assert str(paths[1]) in err and str(copy) in err and "eval_cases.yaml::c" in err
    assert not (project.path / "all.json").exists()


def test_merge_names_the_missing_shard_and_marks_the_report_incomplete(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _shards(project)
    merged = project.path / "part.json"
    code, _, err = _cli(capsys, "merge", str(paths[0]), str(paths[2]), "-o", str(merged))
    assert code == 0
    assert "shard 2/3 is missing" in err
    run = _load(merged)["run"]
    left_out = _load(paths[1])["run"]["shard"]["selected"]
    assert (
        run["finished"] is False
        and run["missing_shards"] == [2]
        and run["missing_items"] == left_out
    )
    assert _cli(capsys, "html", str(merged), "-o", str(project.path / "part.html"))[0] == 0
    assert (
        "This report does not hold the whole run: shard 2/3 is missing"
        in (project.path / "part.html").read_text()
    )


def test_merge_says_when_shards_of_different_runs_are_joined(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    one = project.path / "one.json"
    project.runpytest(*RUN, "--agent-eval-shard", "1/2", "--agent-eval-report", str(one))
    paths = _shards(project)
    merged = project.path / "mixed.json"
    code, _, err = _cli(capsys, "merge", str(one), str(paths[1]), str(paths[2]), "-o", str(merged))
    assert code == 2
    assert "the shards are not of one run" in err
    assert (
        f"{one} is shard 1/2 of 13 items" in err and f"{paths[1]} is shard 2/3 of 13 items" in err
    )
    assert not merged.exists()


# -- 3. gate
# --------------------------------------------------------------------------------------------------


def test_shard_merge_gate_with_a_planted_regression_and_a_missing_shard(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's done-when: a baseline run, then 3 shards (a case broken), merged and gated."""
    base = project.path / "base.json"
    project.runpytest(*RUN, "--agent-eval-report", str(base))
    monkeypatch.setenv("FLIP", "1")  # c03 fails from now on
    paths = _shards(project, "--agent-eval-min-pass-rate", "0.85")
    merged = project.path / "all.json"
    assert _cli(capsys, "merge", *map(str, paths), "-o", str(merged))[0] == 0
    assert len(_ids(_load(merged))) == 12

    code, out, err = _cli(capsys, "gate", str(merged), "--baseline", str(base))
    assert code == 1
    assert "eval_cases.yaml::c03" in out and "regression" in out

    partial = project.path / "partial.json"
    without = [p for p in paths if "eval_cases.yaml::c03" not in _ids(_load(p))]
    _cli(capsys, "merge", str(without[0]), str(without[1]), "-o", str(partial))
    missing = ({1, 2, 3} - {_load(p)["run"]["shard"]["index"] for p in without}).pop()
    code, out, err = _cli(capsys, "gate", str(partial), "--baseline", str(base))
    assert code == 1  # no case regressed, but a shard is missing
    assert f"shard {missing}/3 is missing" in out

    code, out, err = _cli(capsys, "gate", str(merged), "--baseline", str(merged))
    assert code == 0, out + err


def test_a_suite_threshold_is_judged_on_the_merged_whole(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "FLIP", "1"
    )  # 11 of 12 cases pass: 0.92 overall, under 0.85 in the broken case's shard
    missed = []
    for i in (1, 2, 3):
        path = project.path / f"t{i}.json"
        result = project.runpytest(
            *RUN,
            "--agent-eval-shard",
            f"{i}/3",
            "--agent-eval-report",
            str(path),
            "--agent-eval-min-pass-rate",
            "0.85",
        )
        missed.append(
            any("agent eval threshold missed: pass rate" in line for line in result.outlines)
        )
    assert missed.count(True) == 1
    merged = project.path / "all.json"
    _cli(capsys, "merge", *(str(project.path / f"t{i}.json") for i in (1, 2, 3)), "-o", str(merged))
    code, out, err = _cli(capsys, "gate", str(merged), "--min-pass-rate", "0.85")
    assert code == 0, out + err
    code, out, err = _cli(capsys, "gate", str(merged), "--min-pass-rate", "0.95")
    assert code == 1
    assert "pass rate 0.92 (11/12) < agent_eval_min_pass_rate 0.95" in out


def test_known_failures_alone_do_not_fail_the_gate_and_markdown_is_written(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIP", "1")
    report = project.path / "r.json"
    project.runpytest(*RUN, "--agent-eval-report", str(report))
    summary = project.path / "summary.md"
    summary.write_text("earlier step\n")
    code, out, err = _cli(
        capsys, "gate", str(report), "--baseline", str(report), "--markdown", str(summary)
    )
    assert code == 0, out + err  # c03 failed in the baseline too
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, as $GITHUB_STEP_SUMMARY wants
    assert (
        "## agent eval summary" in text
        and "eval_cases.yaml::c03" in text
        and "**Gate passed**" in text
    )


def test_a_report_with_cases_not_run_fails_the_gate(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    report = project.path / "r.json"
    project.runpytest(*RUN, "--agent-eval-report", str(report))
    data = json.loads(report.read_text())
    data["not_run"] = [
        {"nodeid": "eval_cases.yaml::c05", "file": "eval_cases.yaml", "line": 7, "reason": "crash"}
    ]
    report.write_text(json.dumps(data))
    code, out, _ = _cli(capsys, "gate", str(report))
    assert code == 1
    assert "1 case not run" in out and "eval_cases.yaml::c05" in out


@pytest.mark.parametrize("kind", ["missing", "not json", "wrong schema"])
def test_gate_exits_2_on_an_unusable_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "r.json"
    if kind == "not json":
        path.write_text("{nope")
    elif kind == "wrong schema":
        path.write_text(json.dumps({"schema_version": 99, "cases": []}))
    code, _, err = _cli(capsys, "gate", str(path))
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"agent-eval gate: {path}")


# -- 4. resume
# --------------------------------------------------------------------------------------------------


def test_resume_runs_exactly_the_cases_without_a_final_record_and_writes_one_report(
    project: pytest.Pytester,
) -> None:
    report = project.path / "r.json"
    project.runpytest(*RUN, "--agent-eval-report", str(report))
    data = json.loads(report.read_text())
    data["cases"] = [
        c for c in data["cases"] if c["case_id"] not in ("c01", "c07")
    ]  # never finished
    crashed = next(c for c in data["cases"] if c["case_id"] == "c09")
    crashed.update(
        outcome="error", error="worker 'gw0' crashed"
    )  # its worker died: an error record, not run
    data["not_run"] = [
        {"nodeid": crashed["nodeid"], "file": "eval_cases.yaml", "line": 11, "reason": "crash"}
    ]
    report.write_text(json.dumps(data))
    kept = {c["nodeid"]: c for c in data["cases"] if c["case_id"] != "c09"}

    result = project.runpytest(
        *RUN, "--agent-eval-resume", str(report), "--agent-eval-report", str(report)
    )
    assert _ran(result) == {f"eval_cases.yaml::{c}" for c in ("c01", "c07", "c09")}
    assert result.parseoutcomes()["deselected"] == 10  # the 9 finished cases and the plain test
    after = _load(report)
    assert _ids(after) == [f"eval_cases.yaml::c{i:02d}" for i in range(12)]
    by_id = {c["nodeid"]: c for c in after["cases"]}
    assert (
        by_id["eval_cases.yaml::c09"]["outcome"] == "passed"
    )  # the rerun's record replaces the crash's
    assert all(by_id[n] == c for n, c in kept.items())  # the finished ones as they were
    assert not after.get("not_run")
    assert after["run"]["resumed_from"]["kept"] == 9


def test_resume_with_nothing_left_says_so(project: pytest.Pytester) -> None:
    report = project.path / "r.json"
    project.runpytest(*RUN, "--agent-eval-report", str(report))
    result = project.runpytest(*RUN, "--agent-eval-resume", str(report))
    assert _ran(result) == set()
    assert result.ret == pytest.ExitCode.OK  # not "no tests collected": the report is whole
    result.stdout.fnmatch_lines(
        ["*agent eval resume: every case of r.json has a final record: nothing to run*"]
    )


@pytest.mark.parametrize("text", [None, "{nope", '{"schema_version": 1}'])
def test_an_unreadable_resume_report_is_a_usage_error(
    project: pytest.Pytester, text: str | None
) -> None:
    if text is not None:
        (project.path / "r.json").write_text(text)
    result = project.runpytest(*RUN, "--agent-eval-resume", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any("--agent-eval-resume" in line and "r.json" in line for line in result.errlines)


def test_resume_under_xdist_sends_the_workers_what_to_leave_out(project: pytest.Pytester) -> None:
    report = project.path / "r.json"
    project.runpytest(*RUN, "--agent-eval-report", str(report))
    data = json.loads(report.read_text())
    data["cases"] = [c for c in data["cases"] if c["case_id"] not in ("c02", "c10")]
    report.write_text(json.dumps(data))
    out = project.path / "out.json"
    result = project.runpytest_subprocess(
        *RUN, "-n", "2", "--agent-eval-resume", str(report), "--agent-eval-report", str(out)
    )
    assert _ran(result) == {"eval_cases.yaml::c02", "eval_cases.yaml::c10"}
    assert _ids(_load(out)) == [f"eval_cases.yaml::c{i:02d}" for i in range(12)]
    result.stdout.fnmatch_lines(
        ["*agent eval resume: ran 2 cases r.json has no final record of; kept its 10*"]
    )


def test_a_shards_report_resumes_with_its_own_shard(project: pytest.Pytester) -> None:
    report = project.path / "s2.json"
    project.runpytest(*RUN, "--agent-eval-shard", "2/3", "--agent-eval-report", str(report))
    result = project.runpytest(*RUN, "--agent-eval-resume", str(report))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{report} is the report of shard 2/3: resume it with --agent-eval-shard 2/3*"]
    )
    result = project.runpytest(
        *RUN, "--agent-eval-resume", str(report), "--agent-eval-shard", "2/3"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*nothing to run*"])


def test_merge_and_gate_import_no_pytest(project: pytest.Pytester) -> None:
    paths = _shards(project)
    script = (
        "import sys\nfrom pytest_agent_eval.cli import main\n"
        f"codes = [main(['merge', *{[str(p) for p in paths]!r}, '-o', 'all.json']), main(['gate', "
        "'all.json', '--baseline', 'all.json', '--min-pass-rate', '0.5', "
        "'--markdown', 'x.md'])]\n"
        "print('codes', codes, 'pytest imported:', 'pytest' in sys.modules or "
        "'_pytest' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=project.path, capture_output=True, text=True
    )
    assert "codes [0, 0] pytest imported: False" in done.stdout, done.stdout + done.stderr
