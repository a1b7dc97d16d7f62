"""Suite thresholds: a missed one fails the run with a line naming it; an unknown one says so."""

from __future__ import annotations

import pytest

from pytest_agent_eval.report.stats import Stats
from pytest_agent_eval.report.thresholds import Thresholds

AGENT = """
import time

def run(query, context):
    time.sleep(float(context.get("sleep", 0)))
    if "cost" in context:
        return {"output": query, "usage": {"prompt_tokens": 5, "completion_tokens": 5, \
"cost": context["cost"]}}
    return query
"""

COSTLY = """\
agent: thr_agent:run
cases:
  - {id: x, input: sure, context: {cost: 0.02}}
  - {id: y, input: sure, context: {cost: 0.03}}
"""

FILE = """\
agent: thr_agent:run
cases:
  - {id: a, input: sure}
  - {id: b, input: sure, context: {sleep: 0.3}}
  - {id: c, input: sure, expect: {contains: [nope]}}
  - {id: d, input: sure, expect: {contains: [nope]}}
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(thr_agent=AGENT)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml", eval_thr=FILE, costly=COSTLY
    )  # costly.yaml: collected only when named
    return pytester


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["--agent-eval-min-pass-rate", "0.6"], 1,
         "*missed: pass rate 0.50 (2/4) < agent_eval_min_pass_rate 0.6"),
        (["--agent-eval-min-pass-rate", "0.5", "-k", "not c and not d"], 0, None),
        (["--agent-eval-max-p95-latency", "0.2"], 1,
         "*missed: latency p95 0.* s > agent_eval_max_p95_latency_s 0.2"),
        (["--agent-eval-max-p95-latency", "5", "-k", "not c and not d"], 0, None),
        (["--agent-eval-max-cost", "0.01", "eval_thr.yaml::a"], 0,
         "*not checked: agent_eval_max_cost: no cost*"),
        (["--agent-eval-max-cost", "0.04", "costly.yaml"], 1,
         "*missed: cost 0.0500 > agent_eval_max_cost 0.04"),
        (["--agent-eval-max-cost", "0.05", "costly.yaml"], 0, None),
    ],
    ids=[
        "pass-rate-missed", "pass-rate-met", "latency-missed", "latency-met", "cost-unknown",
        "cost-missed", "cost-met",
    ],
)  # fmt: skip
def test_a_threshold_decides_the_exit_status(
    suite: pytest.Pytester, args: list[str], code: int, line: str | None
) -> None:
    result = suite.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == code
    if line is not None:
        result.stdout.fnmatch_lines([line])
    if code == 0:
        result.stdout.no_fnmatch_line("*threshold missed*")


def test_thresholds_from_the_ini_file(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nagent_eval_min_pass_rate = 0.9\n")
    result = suite.runpytest("-p", "no:cacheprovider", "-k", "not c and not d")
    assert result.ret == 0
    result = suite.runpytest("-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*threshold missed: pass rate 0.50 (2/4) < agent_eval_min_pass_rate 0.9"]
    )


def _stats(**figures: object) -> Stats:
    base: dict[str, object] = dict(
        total=4, passed=3, failed=1, errors=0, skipped=0, mean_score=0.8, min_score=0.0,
        repeated_pass_rate=None, latency_p50=0.1, latency_p95=0.4, tool_accuracy=None, tokens=1200,
        cost=0.02,
    )  # fmt: skip
    return Stats(**{**base, **figures})  # type: ignore[arg-type]


def test_threshold_figures() -> None:
    limits = Thresholds(min_pass_rate=0.75, max_cost=0.01, max_p95_latency_s=0.5)
    missed, unknown = limits.check(_stats())
    assert missed == ["cost 0.0200 > agent_eval_max_cost 0.01"] and unknown == []
    missed, unknown = limits.check(_stats(passed=2, errors=1, cost=None))
    assert missed == [
        "pass rate 0.50 (2/4) < agent_eval_min_pass_rate 0.75"
    ]  # an error counts as not passed
    assert unknown == [
        "agent_eval_max_cost: no cost reported (turn on the traffic hook or report usage)"
    ]
    assert not Thresholds()


def test_a_threshold_in_the_ini_file_that_is_no_number_is_a_usage_error(
    suite: pytest.Pytester,
) -> None:
    suite.makeini("[pytest]\nagent_eval_max_cost = cheap\n")
    result = suite.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini agent_eval_max_cost = 'cheap': give a number*"])


def test_a_threshold_missed_fails_the_run_under_the_regression_gate(suite: pytest.Pytester) -> None:
    """Issue 24 item 10: `--agent-eval-gate regressions`, but a missed threshold still fails."""
    suite.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")
    gated = [
        "-p",
        "no:cacheprovider",
        "--agent-eval-baseline",
        "base.json",
        "--agent-eval-gate",
        "regressions",
    ]
    assert (
        suite.runpytest(*gated).ret == pytest.ExitCode.OK
    )  # c and d failed before too: no regression
    result = suite.runpytest(*gated, "--agent-eval-min-pass-rate", "0.6")
    result.stdout.fnmatch_lines(
        ["*threshold missed: pass rate 0.50 (2/4) < agent_eval_min_pass_rate 0.6"]
    )
    result.stdout.fnmatch_lines(
        ["compared with the baseline: 0 regressions, 0 fixes, 0 new, 0 missing"]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
