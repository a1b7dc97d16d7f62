"""Statistics of repeated and compared runs (SPEC §20), each checked independently.

pass@k / pass^k, the exact McNemar test and the bootstrap interval of the pass-rate change, each
checked against an independent computation (scipy, itertools), and the `--agent-eval-gate suite`
gate as a user runs it.
"""

from __future__ import annotations

import html
import itertools
import json
import random

import jsonschema
import pytest

from pytest_agent_eval.report.baseline import compare
from pytest_agent_eval.report.record import CaseRecord, TrialRecord
from pytest_agent_eval.report.schema import report_schema
from pytest_agent_eval.report.significance import (
    bootstrap_interval,
    mcnemar_exact,
    pass_at_k,
    pass_hat_k,
)

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")


@pytest.mark.parametrize(
    ("n", "c", "k"), [(n, c, k) for n in range(1, 9) for c in range(n + 1) for k in range(1, n + 1)]
)
def test_pass_at_k_and_pass_hat_k_match_scipy_and_counting(n: int, c: int, k: int) -> None:
    comb = scipy_special.comb
    assert pass_at_k(n, c, k) == pytest.approx(
        1 - comb(n - c, k, exact=True) / comb(n, k, exact=True)
    )
    assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k, exact=True) / comb(n, k, exact=True))
    # by definition: over every k-subset of the n trials, the share with a pass / with passes only
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(trials, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


def test_k_beyond_the_trials_is_not_computed() -> None:
    assert pass_at_k(3, 2, 4) is None and pass_hat_k(3, 2, 4) is None


@pytest.mark.parametrize(("harmful", "beneficial"), [(b, c) for b in range(13) for c in range(13)])
def test_mcnemar_matches_scipys_exact_binomial_test(harmful: int, beneficial: int) -> None:
    expected = (
        1.0
        if harmful + beneficial == 0
        else scipy_stats.binomtest(harmful, harmful + beneficial).pvalue
    )
    assert mcnemar_exact(harmful, beneficial) == pytest.approx(expected, rel=1e-9)


def _pairs(seed: int, cases: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(cases):
        base_trials, cand_trials = rng.randint(1, 5), rng.randint(1, 5)
        out.append(
            ((rng.randint(0, base_trials), base_trials), (rng.randint(0, cand_trials), cand_trials))
        )
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_bootstrap_interval_matches_scipys_bootstrap_over_cases(seed: int) -> None:
    """scipy resamples the case indices (a case's trials together); percentile intervals agree.

    They agree within the Monte Carlo error of the resampling.
    """
    np = pytest.importorskip("numpy")
    pairs = _pairs(seed, 40)
    base = np.array([b for b, _ in pairs], dtype=float)
    cand = np.array([c for _, c in pairs], dtype=float)

    def change(index: object, axis: int = -1) -> object:
        index = np.asarray(index, dtype=int)
        b, c = base[index], cand[index]
        return c[..., 0].sum(axis=-1) / c[..., 1].sum(axis=-1) - b[..., 0].sum(axis=-1) / b[
            ..., 1
        ].sum(axis=-1)

    scipy_ci = scipy_stats.bootstrap(
        (np.arange(len(pairs)),),
        change,
        method="percentile",
        n_resamples=20000,
        random_state=seed,
        vectorized=True,
    ).confidence_interval
    low, high = bootstrap_interval(pairs)
    assert low == pytest.approx(scipy_ci.low, abs=0.03)
    assert high == pytest.approx(scipy_ci.high, abs=0.03)
    assert bootstrap_interval(pairs) == (low, high)  # seeded: the same interval every time


def _case(nodeid: str, trials: tuple[bool, ...]) -> CaseRecord:
    passed = sum(trials) == len(trials)
    return CaseRecord(
        nodeid=nodeid,
        case_id=nodeid,
        file="eval_x.yaml",
        line=1,
        outcome="passed" if passed else "failed",
        passes=sum(trials),
        trials=[TrialRecord(passed=t, score=float(t), latency_s=0.1) for t in trials],
    )


def test_the_suite_test_counts_flips_and_keeps_trials_inside_their_case() -> None:
    base = [_case(f"c{i}", (True, True)) for i in range(6)] + [
        _case("f1", (False, False)),
        _case("f2", (True, False)),
    ]
    cand = [_case(f"c{i}", (True, False) if i < 4 else (True, True)) for i in range(6)]
    cand += [_case("f1", (True, True)), _case("f2", (False, False))]
    suite = compare(base, cand).suite
    assert suite is not None
    assert (suite.cases, suite.base_passed, suite.passed, suite.harmful, suite.beneficial) == (
        8,
        6,
        3,
        4,
        1,
    )
    assert suite.p_value == pytest.approx(scipy_stats.binomtest(1, 5).pvalue)
    assert suite.change == pytest.approx(
        10 / 16 - 13 / 16
    )  # passing trials over trials, candidate - baseline
    assert suite.low <= suite.change <= suite.high
    same = compare(base, base).suite
    assert same is not None and (same.p_value, same.change, same.low, same.high) == (
        1.0,
        0.0,
        0.0,
        0.0,
    )


# -- as a user runs it
# --------------------------------------------------------------------------------------------

FLAKY_AGENT = """
from collections import Counter

_TRIALS = Counter()

def run(query, context):
    \"\"\"Trial n of a case answers `hello` when `pattern[n]` is 1 (the pattern repeats), \
else `nope`.\"\"\"
    n = _TRIALS[query]
    _TRIALS[query] += 1
    pattern = context.get("pattern", [1])
    return "hello" if pattern[n % len(pattern)] else "nope"
"""


@pytest.fixture
def flaky(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(flaky_agent=FLAKY_AGENT)
    pytester.syspathinsert()
    return pytester


def test_pass_at_k_of_repeated_cases_in_the_record_summary_and_reports(
    flaky: pytest.Pytester,
) -> None:
    flaky.makefile(
        ".yaml",
        eval_rep="""\
agent: flaky_agent:run
defaults: {expect: {contains: [hello]}}
cases:
  - {id: mostly, input: a, repeat: 5, min_pass_rate: 0.6, context: {pattern: [1, 1, 0, 1, 0]}}
  - {id: rarely, input: b, repeat: 5, min_pass_rate: 0.2, context: {pattern: [0, 0, 0, 1, 0]}}
  - {id: once, input: c}
""",
    )
    result = flaky.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-k", "2", "--agent-eval-report", "r.json",
        "--agent-eval-markdown", "s.md", "--agent-eval-html", "r.html",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    comb = scipy_special.comb
    expected = {
        "mostly": (1 - comb(2, 2) / comb(5, 2), comb(3, 2) / comb(5, 2)),
        "rarely": (1 - comb(4, 2) / comb(5, 2), comb(1, 2) / comb(5, 2)),
    }
    cases = {c["case_id"]: c for c in json.loads((flaky.path / "r.json").read_text())["cases"]}
    for case, (at_k, hat_k) in expected.items():
        assert (cases[case]["k"], cases[case]["pass_at_k"], cases[case]["pass_hat_k"]) == (
            2,
            pytest.approx(at_k),
            pytest.approx(hat_k),
        )
    assert (cases["once"]["k"], cases["once"]["pass_at_k"]) == (
        None,
        None,
    )  # one trial: nothing to estimate
    mean_at = (expected["mostly"][0] + expected["rarely"][0]) / 2
    mean_hat = (expected["mostly"][1] + expected["rarely"][1]) / 2
    line = f"repeated cases (2): pass@2 {mean_at:.2f}, pass^2 {mean_hat:.2f} (means)"
    result.stdout.fnmatch_lines([line])
    assert line in (flaky.path / "s.md").read_text()
    assert html.escape(line) in (flaky.path / "r.html").read_text()


def _suite(failing: int, total: int = 8) -> str:
    cases = "".join(
        f"  - {{id: c{i}, input: q{i}, context: {{pattern: [{0 if i < failing else 1}]}}}}\n"
        for i in range(total)
    )
    return f"agent: flaky_agent:run\ndefaults: {{expect: {{contains: [hello]}}}}\ncases:\n{cases}"


def test_gate_suite_fails_a_significant_drop_of_the_pass_rate(flaky: pytest.Pytester) -> None:
    flaky.makefile(".yaml", eval_s=_suite(0))
    flaky.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json").assert_outcomes(
        passed=8
    )
    flaky.makefile(".yaml", eval_s=_suite(7))
    result = flaky.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json",
        "--agent-eval-gate", "suite", "--agent-eval-report", "cand.json",
        "--agent-eval-html", "cand.html",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    p = scipy_stats.binomtest(0, 7).pvalue
    result.stdout.fnmatch_lines(
        [
            "compared with the baseline: 7 regressions, 0 fixes, 0 new, 0 missing",
            f"suite: 8/8 -> 1/8 cases passed; McNemar 7 harmful, 0 beneficial, p = {p:.3g}; "
            "pass rate of trials -87.5 pp (95% CI * to *, bootstrap over cases)",
            "the run fails: the suite's pass rate dropped (McNemar p < 0.05)",
        ]
    )
    document = json.loads((flaky.path / "cand.json").read_text())
    jsonschema.validate(document, report_schema())
    suite = document["baseline"]["suite"]
    assert (suite["harmful"], suite["beneficial"], suite["p_value"]) == (7, 0, pytest.approx(p))
    assert (
        suite["change"] == pytest.approx(-7 / 8)
        and suite["low"] <= suite["change"] <= suite["high"] < 0
    )
    assert "McNemar 7 harmful, 0 beneficial" in (flaky.path / "cand.html").read_text()
    compared = flaky.run("agent-eval", "compare", "base.json", "cand.json")
    compared.stdout.fnmatch_lines(
        [f"suite: 8/8 -> 1/8 cases passed; McNemar 7 harmful, 0 beneficial, p = {p:.3g};*"]
    )


def test_gate_suite_passes_a_drop_that_is_not_significant_despite_regressions(
    flaky: pytest.Pytester,
) -> None:
    flaky.makefile(".yaml", eval_s=_suite(0))
    flaky.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")
    flaky.makefile(".yaml", eval_s=_suite(2))
    result = flaky.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json", "--agent-eval-gate", "suite"
    )
    result.assert_outcomes(passed=6, failed=2)
    assert result.ret == pytest.ExitCode.OK  # 2 harmful flips of 8: McNemar p = 0.5
    result.stdout.fnmatch_lines(
        ["suite: 8/8 -> 6/8 cases passed; McNemar 2 harmful, 0 beneficial, p = 0.5;*"]
    )
    result.stdout.no_fnmatch_line("the run fails*")


def test_gate_suite_fails_a_baseline_not_compared(flaky: pytest.Pytester) -> None:
    flaky.makefile(".yaml", eval_other=_suite(0))
    flaky.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")
    (flaky.path / "eval_other.yaml").unlink()
    flaky.makefile(".yaml", eval_s=_suite(0))
    result = flaky.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-baseline", "base.json", "--agent-eval-gate", "suite"
    )
    result.assert_outcomes(passed=8)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["the run fails: the baseline was not compared with it"])


def test_the_suite_line_says_which_figure_counts_cases_and_which_trials() -> None:
    """Repeated cases: the pass-rate change is the trials', and the line says so.

    8/8 -> 0/8 cases passed (each by its min_pass_rate) while 40/40 -> 4/40 trials passed; the
    -90.0 pp is the trials' pass rate.
    """
    from pytest_agent_eval.report.significance import SuiteTest

    decided = [(True, False, ((5, 5), (1 if i < 4 else 0, 5))) for i in range(8)]
    suite = SuiteTest.of(decided)
    assert suite is not None
    assert suite.line().startswith(
        "suite: 8/8 -> 0/8 cases passed; McNemar 8 harmful, 0 beneficial, p = 0.00781; pass "
        "rate of trials -90.0 pp"
    )
