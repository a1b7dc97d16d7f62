"""Baseline comparison (SPEC §10): regressions, fixes, new, missing; Fisher's test for repeats."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from pytest_agent_eval.report.baseline import BaselineError, compare, fisher_less, load_records
from pytest_agent_eval.report.record import CaseRecord, TrialRecord
from pytest_agent_eval.report.schema import report_schema


def _case(
    nodeid: str, outcome: str, score: float | None = 1.0, trials: tuple[bool, ...] = (True,)
) -> CaseRecord:
    return CaseRecord(
        nodeid=nodeid,
        case_id=nodeid.rpartition("::")[2],
        file="eval_x.yaml",
        line=1,
        outcome=outcome,
        score=score,
        passes=sum(trials),
        trials=[TrialRecord(passed=t, score=1.0 if t else 0.0, latency_s=0.1) for t in trials],
    )


def test_fisher_matches_the_hypergeometric_tail() -> None:
    assert fisher_less(5, 5, 0, 5) == pytest.approx(1 / 252)
    assert fisher_less(5, 5, 4, 5) == pytest.approx(
        0.5
    )  # 9 passes of 10: base holds all 5 half the time
    assert fisher_less(3, 5, 3, 5) == pytest.approx(
        0.7380952, rel=1e-6
    )  # no drop: far from significant
    assert fisher_less(10, 10, 5, 10) == pytest.approx(0.0162539, rel=1e-5)


def test_single_trial_cases() -> None:
    base = [
        _case("a::regress", "passed"),
        _case("a::fix", "failed", 0.0),
        _case("a::drop", "passed", 0.9),
        _case("a::small_drop", "passed", 0.9),
        _case("a::gone", "passed"),
        _case("a::skipped", "passed"),
        _case("a::error", "passed"),
    ]
    cand = [
        _case("a::regress", "failed", 0.0),
        _case("a::fix", "passed"),
        _case("a::drop", "passed", 0.8),
        _case("a::small_drop", "passed", 0.86),
        _case("a::added", "passed"),
        _case("a::skipped", "skipped", None, ()),
        _case("a::error", "error", None, ()),
    ]
    result = compare(base, cand, tolerance=0.05)
    assert [(c.nodeid, c.detail) for c in result.regressions] == [
        ("a::drop", "score 0.90 -> 0.80 (dropped more than 0.05)"),
        ("a::error", "passed -> error"),
        ("a::regress", "passed -> failed"),
    ]
    assert [(c.nodeid, c.detail) for c in result.fixes] == [("a::fix", "failed -> passed")]
    assert [c.nodeid for c in result.new] == ["a::added"]
    assert [(c.nodeid, c.detail) for c in result.missing] == [("a::gone", "was passed")]


def test_repeated_cases_regress_only_on_a_significant_drop() -> None:
    flaky = (True, True, True, False, True)
    base = [
        _case("a::noise", "passed", trials=(True,) * 5),
        _case("a::broken", "passed", trials=(True,) * 10),
    ]
    cand = [
        _case("a::noise", "failed", trials=flaky),
        _case("a::broken", "failed", trials=(True,) * 5 + (False,) * 5),
    ]
    result = compare(base, cand, significance=0.05)
    assert [(c.nodeid, c.detail) for c in result.regressions] == [
        ("a::broken", "pass rate 10/10 -> 5/10 (Fisher p = 0.0163 < 0.05)")
    ]
    assert compare(base, cand, significance=0.01).regressions == []
    nine, eight = (True,) * 9 + (False,), (True,) * 8 + (False,) * 2
    noise = compare([_case("a::n", "passed", trials=nine)], [_case("a::n", "passed", trials=eight)])
    assert (noise.regressions, noise.fixes) == ([], [])  # 9/10 -> 8/10: p = 0.5, noise


def test_a_baseline_that_is_no_report_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "base.json"
    bad.write_text('{"cases": []}')
    with pytest.raises(BaselineError, match=r"base\.json: not an --agent-eval-report file"):
        load_records(bad)
    bad.write_text("{")
    with pytest.raises(BaselineError, match=r"base\.json: not JSON"):
        load_records(bad)
    with pytest.raises(BaselineError, match=r"nope\.json: cannot read the report"):
        load_records(tmp_path / "nope.json")
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps({"schema_version": 1, "run": {}, "cases": [_case("a::b", "passed").to_dict()]})
    )
    assert load_records(good) == [_case("a::b", "passed")]


BASE_SUITE = """\
agent: usage_agent:run
cases:
  - {id: steady, input: hi, context: {say: hello}, expect: {contains: [hello]}}
  - {id: breaks, input: hi, context: {say: hello}, expect: {contains: [hello]}}
  - {id: heals, input: hi, context: {say: nope}, expect: {contains: [hello]}}
  - {id: goes, input: hi, context: {say: hello}}
"""
CAND_SUITE = """\
agent: usage_agent:run
cases:
  - {id: steady, input: hi, context: {say: hello}, expect: {contains: [hello]}}
  - {id: breaks, input: hi, context: {say: nope}, expect: {contains: [hello]}}
  - {id: heals, input: hi, context: {say: hello}, expect: {contains: [hello]}}
  - {id: comes, input: hi, context: {say: hello}}
"""
KNOWN_FAILURE = """\
agent: usage_agent:run
cases:
  - {id: steady, input: hi, context: {say: hello}, expect: {contains: [hello]}}
  - {id: known, input: hi, context: {say: nope}, expect: {contains: [hello]}}
"""


@pytest.fixture
def runs(pytester: pytest.Pytester) -> pytest.Pytester:
    from report_support import USAGE_AGENT

    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.syspathinsert()
    return pytester


def _baseline(pytester: pytest.Pytester, suite: str) -> None:
    pytester.makefile(".yaml", eval_s=suite)
    pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")


def test_the_summary_shows_the_comparison_and_the_run_can_fail_on_it(runs: pytest.Pytester) -> None:
    _baseline(runs, BASE_SUITE)
    runs.makefile(".yaml", eval_s=CAND_SUITE)
    result = runs.runpytest("-p", "no:cacheprovider", "--agent-eval-baseline", "base.json")
    result.stdout.fnmatch_lines(
        [
            "*- baseline base.json -*",
            "compared with the baseline: 1 regressions, 1 fixes, 1 new, 1 missing",
            "regressions:",
            "  eval_s.yaml::breaks: passed -> failed",
            "fixes:",
            "  eval_s.yaml::heals: failed -> passed",
            "new:",
            "  eval_s.yaml::comes: passed",
            "missing:",
            "  eval_s.yaml::goes: was passed",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # `breaks` failed
    gated = runs.runpytest(
        "-p",
        "no:cacheprovider",
        "--agent-eval-baseline",
        "base.json",
        "--agent-eval-gate",
        "regressions",
    )
    assert gated.ret == pytest.ExitCode.TESTS_FAILED


def test_gate_regressions_passes_a_run_whose_failures_were_known(runs: pytest.Pytester) -> None:
    _baseline(runs, KNOWN_FAILURE)
    plain = runs.runpytest("-p", "no:cacheprovider", "--agent-eval-baseline", "base.json")
    assert plain.ret == pytest.ExitCode.TESTS_FAILED
    gated = runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline=base.json", "--agent-eval-gate=regressions"
    )
    gated.assert_outcomes(passed=1, failed=1)
    gated.stdout.fnmatch_lines(
        ["compared with the baseline: 0 regressions, 0 fixes, 0 new, 0 missing"]
    )
    assert gated.ret == pytest.ExitCode.OK


def test_fail_on_regression_fails_a_run_of_passing_cases_whose_score_dropped(
    runs: pytest.Pytester,
) -> None:
    scored = (
        "agent: usage_agent:run\ncases:\n"
        "  - {{id: s, input: hi, min_score: 0.4, context: {{say: {say}}}, expect: {{contains: "
        "[hello, there]}}}}\n"
    )
    _baseline(runs, scored.format(say="hello there"))
    runs.makefile(".yaml", eval_s=scored.format(say="hello"))
    plain = runs.runpytest("-p", "no:cacheprovider", "--agent-eval-baseline", "base.json")
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(["  eval_s.yaml::s: score 1.00 -> 0.50 (dropped more than 0.05)"])
    assert plain.ret == pytest.ExitCode.OK
    failing = runs.runpytest(
        "-p",
        "no:cacheprovider",
        "--agent-eval-baseline",
        "base.json",
        "--agent-eval-fail-on-regression",
    )
    failing.stdout.fnmatch_lines(["the run fails: regressions against the baseline"])
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    tolerant = runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json",
        "--agent-eval-fail-on-regression", "--agent-eval-tolerance", "0.6",
    )  # fmt: skip
    assert tolerant.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read the report"),
        ("{not json", "not JSON"),
        (
            '{"schema_version": 0, "run": {}, "cases": []}',
            "not an --agent-eval-report file of schema_version 1",
        ),
        (
            '{"stats": {"passes": 3}, "tests": []}',
            "not an --agent-eval-report file of schema_version 1",
        ),
        (
            '{"schema_version": 1, "run": {}, "cases": [{"nodeid": "x"}]}',
            "a case record does not match",
        ),
    ],
    ids=["missing", "not-json", "old-version", "another-tool", "bad-case"],
)
def test_a_bad_baseline_is_one_line_and_the_run_still_runs_and_reports(
    runs: pytest.Pytester, content: str | None, problem: str
) -> None:
    runs.makefile(".yaml", eval_s=KNOWN_FAILURE)
    if content is not None:
        (runs.path / "base.json").write_text(content)
    result = runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json",
        "--agent-eval-gate", "regressions", "--agent-eval-report", "r.json",
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    assert (
        result.ret == pytest.ExitCode.TESTS_FAILED
    )  # the run's own status: the gate is not applied
    lines = [line for line in result.outlines if "base.json" in line]
    assert len(lines) == 1, result.outlines
    assert lines[0].startswith(f"agent eval baseline not used: base.json: {problem}")
    assert lines[0].endswith("; the regression gate is not applied")
    result.stdout.fnmatch_lines(["*agent eval summary*", "all *1/2*"])
    assert [c["nodeid"] for c in json.loads((runs.path / "r.json").read_text())["cases"]] == [
        "eval_s.yaml::known",
        "eval_s.yaml::steady",
    ]
    passing = runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json", "-k", "steady"
    )
    assert passing.ret == pytest.ExitCode.OK


def test_agent_eval_compare(runs: pytest.Pytester) -> None:
    _baseline(runs, BASE_SUITE)
    runs.makefile(".yaml", eval_s=CAND_SUITE)
    runs.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "cand.json")
    result = runs.run("agent-eval", "compare", "base.json", "cand.json")
    assert result.ret == 0
    lines = result.stdout.lines
    assert lines[0] == "compared with the baseline: 1 regressions, 1 fixes, 1 new, 1 missing"
    assert lines[1].startswith(
        "suite: 2/3 -> 2/3 cases passed; McNemar 1 harmful, 1 beneficial, p = 1;"
    )
    assert lines[2] == ""
    header, *rows = (line.split(maxsplit=2) for line in lines[3:] if line)
    assert header == ["change", "case", "detail"]
    assert [row[0] for row in rows] == ["regressions", "fixes", "new", "missing"]
    assert (
        len({line.index(row[1]) for line, row in zip(lines[4:], rows, strict=True)}) == 1
    )  # case column aligned
    failing = runs.run("agent-eval", "compare", "base.json", "cand.json", "--fail-on-regression")
    assert failing.ret == 1
    same = runs.run("agent-eval", "compare", "base.json", "base.json", "--fail-on-regression")
    assert same.ret == 0
    bad = runs.run("agent-eval", "compare", "base.json", "nope.json")
    assert bad.ret == 2
    bad.stderr.fnmatch_lines(["agent-eval compare: nope.json: cannot read the report*"])


@pytest.mark.parametrize(
    "args", [["--agent-eval-gate", "regressions"], ["--agent-eval-fail-on-regression"]]
)
def test_a_gate_without_a_baseline_is_a_usage_error(runs: pytest.Pytester, args: list[str]) -> None:
    runs.makefile(".yaml", eval_s=KNOWN_FAILURE)
    result = runs.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agent-eval-gate and --agent-eval-fail-on-regression need --agent-eval-baseline*"]
    )


TEN_WORDS = "one two three four five six seven eight nine ten"
SCORED = (
    "agent: usage_agent:run\ncases:\n"
    "  - {{id: s, input: hi, min_score: 0.8, context: {{say: {say}}}, expect: "
    "{{contains: [{words}]}}}}\n"
)


def _page_text(path: Path) -> str:
    """The page's baseline section as text (without a browser: the section is plain HTML)."""
    import re

    section = path.read_text().split('<section id="baseline">', 1)[1].split("</section>", 1)[0]
    return re.sub(r"<[^>]+>", " ", section)


def test_every_report_shows_the_one_comparison_made_with_the_runs_tolerance(
    runs: pytest.Pytester,
) -> None:
    """Issue 24 item 11: the HTML page recomputed the comparison with the default tolerance."""
    words = ", ".join(TEN_WORDS.split())
    _baseline(runs, SCORED.format(say=repr(TEN_WORDS), words=words))
    runs.makefile(
        ".yaml", eval_s=SCORED.format(say=repr(TEN_WORDS.replace(" ten", "")), words=words)
    )  # 0.9
    result = runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json",
        "--agent-eval-tolerance", "0.2", "--agent-eval-report", "r.json",
        "--agent-eval-markdown", "m.md", "--agent-eval-html", "page.html",
    )  # fmt: skip
    result.stdout.fnmatch_lines(
        ["compared with the baseline: 0 regressions, 0 fixes, 0 new, 0 missing"]
    )
    assert "0 regressions, 0 fixes, 0 new, 0 missing" in _page_text(runs.path / "page.html")
    markdown = (runs.path / "m.md").read_text()
    assert "**Compared with the baseline:** 0 regressions, 0 fixes, 0 new, 0 missing" in markdown
    report = json.loads((runs.path / "r.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    compared = report["baseline"]
    assert (compared["path"], compared["tolerance"], compared["regressions"]) == (
        "base.json",
        0.2,
        [],
    )
    strict = runs.run("agent-eval", "html", "r.json", "base.json", "-o", "strict.html")
    assert strict.ret == 0
    assert "1 regressions, 0 fixes" in _page_text(
        runs.path / "strict.html"
    )  # the default tolerance, 0.05
    tolerant = runs.run(
        "agent-eval", "html", "r.json", "base.json", "-o", "tolerant.html", "--tolerance", "0.2"
    )
    assert tolerant.ret == 0
    assert "0 regressions, 0 fixes" in _page_text(runs.path / "tolerant.html")
    kept = runs.run(
        "agent-eval", "html", "r.json", "-o", "kept.html"
    )  # the comparison the run made, kept in r.json
    assert kept.ret == 0
    assert "base.json: 0 regressions, 0 fixes, 0 new, 0 missing" in " ".join(
        _page_text(runs.path / "kept.html").split()
    )


OTHER_SUITE = """\
agent: usage_agent:run
cases:
  - {id: other, input: hi, context: {say: hello}, expect: {contains: [hello]}}
"""


def test_a_baseline_with_no_case_in_common_is_not_compared_and_fails_a_gate(
    runs: pytest.Pytester,
) -> None:
    """Issue 24 item 12: every case new or missing read as "0 regressions", and the gate passed."""
    _baseline(runs, BASE_SUITE)
    runs.makefile(".yaml", eval_s=OTHER_SUITE)
    plain = runs.runpytest("-p", "no:cacheprovider", "--agent-eval-baseline", "base.json")
    plain.stdout.fnmatch_lines(["baseline not compared: no case in common with this run*"])
    plain.stdout.no_fnmatch_line("*the run fails*")
    assert plain.ret == pytest.ExitCode.OK  # no gate asked for: the run's own status
    for gate in (["--agent-eval-gate", "regressions"], ["--agent-eval-fail-on-regression"]):
        gated = runs.runpytest(
            "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json", *gate,
            "--agent-eval-report", "r.json", "--agent-eval-markdown", "m.md",
            "--agent-eval-html", "page.html",
        )  # fmt: skip
        gated.assert_outcomes(passed=1)
        gated.stdout.fnmatch_lines(
            ["baseline not compared: no case in common with this run (the baseline has "
             "eval_s.yaml::breaks, eval_s.yaml::goes and 2 more, this run eval_s.yaml::other)",
             "the run fails: the baseline was not compared with it"]
        )  # fmt: skip
        assert gated.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        "**Baseline not compared:** no case in common with this run"
        in (runs.path / "m.md").read_text()
    )
    assert "not compared: no case in common with this run" in _page_text(runs.path / "page.html")
    report = json.loads((runs.path / "r.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    assert report["baseline"]["not_compared"].startswith("no case in common with this run")
    cli = runs.run("agent-eval", "compare", "base.json", "r.json", "--fail-on-regression")
    assert cli.ret == 1
    assert cli.outlines[0].startswith("baseline not compared: no case in common with this run")


def test_a_baseline_written_from_another_rootdir_is_compared(runs: pytest.Pytester) -> None:
    """Issue 24 item 12: seen from another rootdir the node ids differ; they match by path."""
    (runs.path / "evals").mkdir()
    (runs.path / "evals" / "eval_s.yaml").write_text(BASE_SUITE)
    runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-report", "base.json"
    )  # node ids evals/eval_s.yaml::…
    assert json.loads((runs.path / "base.json").read_text())["cases"][0]["nodeid"].startswith(
        "evals/eval_s.yaml::"
    )
    (runs.path / "evals" / "eval_s.yaml").write_text(CAND_SUITE)
    result = runs.runpytest(
        "-p", "no:cacheprovider", "--rootdir", "evals", "evals",
        "--agent-eval-baseline", "base.json", "--agent-eval-gate", "regressions",
    )  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "compared with the baseline: 1 regressions, 1 fixes, 1 new, 1 missing",
            "node ids matched across rootdirs: the baseline's evals/eval_s.yaml::* is this "
            "run's eval_s.yaml::*",
            "regressions:",
            "  eval_s.yaml::breaks: passed -> failed",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_compare_says_why_two_runs_were_not_compared() -> None:
    result = compare([_case("a.yaml::x", "passed")], [_case("b.yaml::y", "failed", 0.0)])
    assert (
        result.not_compared
        == "no case in common with this run (the baseline has a.yaml::x, this run b.yaml::y)"
    )
    assert result.failed and result.lines()[0].startswith(
        "baseline not compared: no case in common"
    )
    moved = compare([_case("evals/a.yaml::x", "passed")], [_case("a.yaml::x", "failed", 0.0)])
    assert (moved.not_compared, [c.nodeid for c in moved.regressions]) == (None, ["a.yaml::x"])
    assert compare([], [_case("a.yaml::x", "passed")]).not_compared == (
        "no case in common with this run (the baseline has no case)"
    )
    assert compare([], []).not_compared is None  # nothing ran: nothing to compare


def test_agent_eval_compare_into_a_closed_pipe_exits_quietly(runs: pytest.Pytester) -> None:
    """Issue 24 item 19: `agent-eval compare … | head` ended in a BrokenPipeError traceback."""
    import shutil
    import subprocess

    _baseline(runs, BASE_SUITE)
    runs.makefile(".yaml", eval_s=CAND_SUITE)
    runs.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "cand.json")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before a line is written: `| head -0`
    try:
        command = [shutil.which("agent-eval") or "agent-eval", "compare", "base.json", "cand.json"]
        done = subprocess.run(
            command, cwd=runs.path, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 1


def test_a_report_path_that_moved_the_rootdir_is_named(
    runs: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 24 item 12: `--agent-eval-baseline /elsewhere/base.json` moves pytest's rootdir.

    With a space, not `=`, the path is a test path to pytest when it chooses the rootdir, before it
    knows the plugin's options: the rootdir moves, the node ids with it.
    """
    runs.makeini("[pytest]\n")
    runs.makefile(".yaml", eval_s=KNOWN_FAILURE)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    runs.runpytest("-p", "no:cacheprovider", f"--agent-eval-report={elsewhere / 'base.json'}")
    moved = runs.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", str(elsewhere / "base.json")
    )
    moved.stdout.fnmatch_lines(
        [f"*pytest chose the rootdir {runs.path.parent} with {elsewhere / 'base.json'} "
         f"(--agent-eval-baseline) as a test path; write --agent-eval-baseline="
         f"{elsewhere / 'base.json'}*"]
    )  # fmt: skip
    moved.stdout.fnmatch_lines(["node ids matched across rootdirs: *"])
    kept = runs.runpytest(
        "-p", "no:cacheprovider", f"--agent-eval-baseline={elsewhere / 'base.json'}"
    )
    kept.stdout.no_fnmatch_line("*pytest chose the rootdir*")
    kept.stdout.fnmatch_lines(
        ["compared with the baseline: 0 regressions, 0 fixes, 0 new, 0 missing"]
    )
