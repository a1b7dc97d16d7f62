"""``--agent-eval-markdown`` and ``agent-eval compare --markdown`` (SPEC §10): CI job summaries."""

from __future__ import annotations

import pytest
from report_support import SUITE, USAGE_AGENT
from test_report_baseline import BASE_SUITE, CAND_SUITE, _case

from pytest_agent_eval.report.baseline import compare
from pytest_agent_eval.report.markdown import markdown_lines, reason
from pytest_agent_eval.report.record import CheckRecord


@pytest.fixture
def runs(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.syspathinsert()
    return pytester


def test_a_failures_reason_is_one_line() -> None:
    errored = _case("e.yaml::boom", "error", None, ())
    errored.error = "RuntimeError: kaput\n  at line 3"
    assert reason(errored) == "RuntimeError: kaput at line 3"
    checked = _case("e.yaml::bad", "failed", 0.0, (False,))
    checked.checks = [
        CheckRecord(name="contains", passed=True, score=1.0, message=""),
        CheckRecord(name="tools_called", passed=False, score=0.0, message="not called: search"),
    ]
    assert reason(checked) == "tools_called: not called: search"
    repeated = _case("e.yaml::rep", "failed", 0.5, (True, False, False, True))
    assert reason(repeated) == "2/4 trials passed"
    long = _case("e.yaml::long", "error", None, ())
    long.error = "x" * 500
    assert len(reason(long)) == 200 and reason(long).endswith("…")


def test_markdown_of_records_and_a_comparison() -> None:
    base = [_case("e.yaml::a", "passed"), _case("e.yaml::b", "failed", 0.0, (False,))]
    cand = [_case("e.yaml::a", "failed", 0.0, (False,)), _case("e.yaml::b", "passed")]
    cand[0].error = "the | agent failed"
    lines = markdown_lines(cand, compare(base, cand))
    assert lines[:4] == [
        "## agent eval summary",
        "",
        "|  | passed | score mean | score min | repeat pass | latency p50 | "
        "latency p95 | tool acc |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    assert lines[4] == "| all | 1/2 | 0.50 | 0.00 | - | 0.10 s | 0.10 s | - |"
    assert "| `e.yaml::a` | failed | the \\| agent failed | `eval_x.yaml:1` |" in lines
    assert lines[-9:] == [
        "",
        "**Compared with the baseline:** 1 regressions, 1 fixes, 0 new, 0 missing",
        "",
        "suite: 1/2 -> 1/2 cases passed; McNemar 1 harmful, 1 beneficial, p = 1; pass rate of "
        "trials +0.0 pp (95% CI -100.0 pp to +100.0 pp, bootstrap over cases)",
        "",
        "| change | case | detail |",
        "|---|---|---|",
        "| regressions | `e.yaml::a` | passed -> failed |",
        "| fixes | `e.yaml::b` | failed -> passed |",
    ]


def test_the_option_appends_the_run_in_one_block(runs: pytest.Pytester) -> None:
    runs.makefile(".yaml", eval_s=BASE_SUITE)
    runs.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")
    runs.makefile(".yaml", eval_s=CAND_SUITE)
    summary = runs.path / "step_summary.md"
    summary.write_text("# an earlier step\n\n")
    result = runs.runpytest(
        "-p",
        "no:cacheprovider",
        "--agent-eval-baseline",
        "base.json",
        f"--agent-eval-markdown={summary}",
    )
    result.assert_outcomes(passed=3, failed=1)
    text = summary.read_text()
    assert text.startswith("# an earlier step\n\n## agent eval summary\n")
    assert "| all | 3/4 | 0.75 | 0.00 | - |" in text
    assert "**Failures (1)**" in text
    assert "| `eval_s.yaml::breaks` | failed | contains: " in text
    assert "| `eval_s.yaml:4` |" in text
    assert "**Compared with the baseline:** 1 regressions, 1 fixes, 1 new, 1 missing" in text
    assert "| regressions | `eval_s.yaml::breaks` | passed -> failed |" in text
    assert "| fixes | `eval_s.yaml::heals` | failed -> passed |" in text
    runs.runpytest("-p", "no:cacheprovider", f"--agent-eval-markdown={summary}")
    again = summary.read_text()
    assert again.startswith(text) and again.count("## agent eval summary") == 2
    assert "Compared with the baseline" not in again[len(text) :]


def test_the_markdown_lists_every_kind_of_failure(runs: pytest.Pytester) -> None:
    runs.makefile(".yaml", eval_suite=SUITE)
    result = runs.runpytest(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-markdown", "out/summary.md"
    )
    result.assert_outcomes(passed=4, failed=2, skipped=1, errors=0, xfailed=1, xpassed=1)
    text = (runs.path / "out" / "summary.md").read_text()
    assert "**Failures (3)**" in text
    assert "| `eval_suite.yaml::bad` | failed | contains: " in text
    assert "| `eval_suite.yaml::boom` | failed | agent raised RuntimeError: kaput |" in text
    assert "| `eval_suite.yaml::fixed_bug` | xpassed | passed unexpectedly |" in text


def test_agent_eval_compare_markdown(runs: pytest.Pytester) -> None:
    runs.makefile(".yaml", eval_s=BASE_SUITE)
    runs.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")
    runs.makefile(".yaml", eval_s=CAND_SUITE)
    runs.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "cand.json")
    result = runs.run(
        "agent-eval", "compare", "base.json", "cand.json", "--markdown", "--fail-on-regression"
    )
    assert result.ret == 1
    assert result.outlines == [
        "**Compared with the baseline:** 1 regressions, 1 fixes, 1 new, 1 missing",
        "",
        "suite: 2/3 -> 2/3 cases passed; McNemar 1 harmful, 1 beneficial, p = 1; pass rate of "
        "trials +0.0 pp (95% CI -100.0 pp to +100.0 pp, bootstrap over cases)",
        "",
        "| change | case | detail |",
        "|---|---|---|",
        "| regressions | `eval_s.yaml::breaks` | passed -> failed |",
        "| fixes | `eval_s.yaml::heals` | failed -> passed |",
        "| new | `eval_s.yaml::comes` | passed |",
        "| missing | `eval_s.yaml::goes` | was passed |",
    ]


STOPPING_AGENT = """
def run(query, context):
    if query == "stop":
        raise KeyboardInterrupt  # as Ctrl-C during the agent's call
    return "hello"
"""
STOPPING_SUITE = """\
agent: stopping_agent:run
cases:
  - {id: a, input: hi, expect: {contains: [hello]}}
  - {id: b, input: stop}
  - {id: c, input: hi}
  - {id: d, input: hi}
"""


def test_the_markdown_of_an_interrupted_run_says_so_and_what_did_not_run(
    pytester: pytest.Pytester,
) -> None:
    """Issue 24 item 19: the markdown written after Ctrl-C read as a clean pass."""
    pytester.makepyfile(stopping_agent=STOPPING_AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_s=STOPPING_SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--agent-eval-markdown", "m.md"
    )
    assert (
        result.ret == pytest.ExitCode.INTERRUPTED
    )  # in a process of its own: the interrupt is not this test's
    text = (pytester.path / "m.md").read_text()
    assert "| all | 1/1 |" in text
    assert (
        "**The run was interrupted:** 1 of 4 eval cases finished; these did not: `eval_s.yaml::b`, "
        "`eval_s.yaml::c`, `eval_s.yaml::d`"
    ) in text
    stopped = pytester.runpytest(
        "-p", "no:cacheprovider", "-x", "--agent-eval-markdown", "x.md", "-k", "not b"
    )
    stopped.assert_outcomes(passed=3)  # nothing failed: -x did not stop it
    assert "interrupted" not in (pytester.path / "x.md").read_text()
    failing = STOPPING_SUITE.replace("expect: {contains: [hello]}", "expect: {contains: [bye]}")
    pytester.makefile(".yaml", eval_s=failing)
    stopped = pytester.runpytest(
        "-p", "no:cacheprovider", "-x", "--agent-eval-markdown", "x.md", "-k", "not b"
    )
    stopped.assert_outcomes(failed=1)
    assert (
        "**The run stopped early (stopping after 1 failures):** 1 of 3 eval cases finished; these "
        "did not: `eval_s.yaml::c`, `eval_s.yaml::d`"
    ) in (pytester.path / "x.md").read_text()
