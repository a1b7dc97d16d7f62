"""The spend cap (SPEC §25): ``--agent-eval-max-cost X`` starts no case once spend reached X.

No case starts once the run's known spend reached X; the cases not started are "not run: spend
cap" in every report, ``--agent-eval-resume`` runs them, and the run fails. One spend for the run:
under ``--agent-eval-concurrency``, under ``-n 2`` (a file store), and in Redis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_support import USAGE_AGENT
from test_traffic import redis_url  # noqa: F401 (a fixture: a redis-server on loopback)

RUN = ("-p", "no:cacheprovider")


def suite(n: int, sleep: float = 0.0) -> str:
    """``n`` cases, each costing 1.0 (its agent's reported usage)."""
    return "agent: usage_agent:run\ncases:\n" + "".join(
        f"  - {{id: c{i:02d}, input: hi, context: {{say: hello, sleep: {sleep}, usage: {{cost: "
        "1.0}}, expect: {contains: [hello]}}\n"
        for i in range(n)
    )


@pytest.fixture
def paid(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.syspathinsert()
    return pytester


def _report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _split(report: dict[str, Any], total: int) -> tuple[int, list[dict[str, Any]]]:
    ran, not_run = len(report["cases"]), report["not_run"]
    assert ran + len(not_run) == total
    assert all(case["outcome"] == "passed" for case in report["cases"])
    return ran, not_run


def test_no_case_starts_once_the_spend_reached_the_cap(paid: pytest.Pytester) -> None:
    paid.makefile(".yaml", eval_paid=suite(6))
    markdown = paid.path / "summary.md"
    result = paid.runpytest(
        *RUN,
        "--agent-eval-max-cost",
        "2.5",
        "--agent-eval-report",
        "r.json",
        f"--agent-eval-markdown={markdown}",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3)
    reason = "not run: spend cap: the known spend 3.0000 reached --agent-eval-max-cost 2.5"
    report = _report(paid.path / "r.json")
    ran, not_run = _split(report, 6)
    assert ran == 3
    assert [e["nodeid"] for e in not_run] == [
        "eval_paid.yaml::c03",
        "eval_paid.yaml::c04",
        "eval_paid.yaml::c05",
    ]
    assert {e["reason"] for e in not_run} == {reason}
    assert [e["line"] for e in not_run] == [6, 7, 8]
    result.stdout.fnmatch_lines(
        [
            "agent eval spend cap: 3 cases not started (the known spend 3.0000 reached "
            "--agent-eval-max-cost 2.5); run them later with --agent-eval-resume REPORT",
        ]
    )
    result.stdout.fnmatch_lines(
        ["agent eval threshold missed: cost 3.0000 > agent_eval_max_cost 2.5"]
    )  # as before
    result.stdout.fnmatch_lines([f"not run: 3 of 6 eval cases: eval_paid.yaml::c03 ({reason}), *"])
    assert f"`eval_paid.yaml::c03` ({reason})" in markdown.read_text()
    # the cases not run are resumable: this run does them, and the report holds all six
    resumed = paid.runpytest(
        *RUN, "--agent-eval-resume", "r.json", "--agent-eval-report", "all.json"
    )
    resumed.assert_outcomes(passed=3)
    assert resumed.ret == pytest.ExitCode.OK
    ran, not_run = _split(_report(paid.path / "all.json"), 6)
    assert ran == 6 and not not_run


def test_under_the_cap_every_case_runs(paid: pytest.Pytester) -> None:
    paid.makefile(".yaml", eval_paid=suite(3))
    result = paid.runpytest(*RUN, "--agent-eval-max-cost", "10")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=3)
    assert "spend cap" not in result.stdout.str()


def test_the_cap_under_concurrency_lets_the_started_cases_finish(paid: pytest.Pytester) -> None:
    paid.makefile(".yaml", eval_paid=suite(16, sleep=0.02))
    result = paid.runpytest(
        *RUN,
        "--agent-eval-concurrency",
        "2",
        "--agent-eval-max-cost",
        "3",
        "--agent-eval-report",
        "r.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    ran, not_run = _split(_report(paid.path / "r.json"), 16)
    assert 3 <= ran < 16  # the cases started before the spend was known finish, no later one starts
    assert all(e["reason"].startswith("not run: spend cap: the known spend ") for e in not_run)
    result.assert_outcomes(passed=ran)


def _xdist(paid: pytest.Pytester, *extra: str) -> None:
    paid.makefile(".yaml", eval_paid=suite(16, sleep=0.05))
    result = paid.runpytest_subprocess(
        *RUN, "-n", "2", "--agent-eval-max-cost", "3", "--agent-eval-report", "r.json", *extra
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    ran, not_run = _split(_report(paid.path / "r.json"), 16)
    # one spend for both workers: each stops once the other's cases reached it too (each may have
    # one in flight)
    assert 3 <= ran <= 4, ran
    assert all(e["reason"].startswith("not run: spend cap: the known spend ") for e in not_run)
    result.stdout.fnmatch_lines([f"agent eval spend cap: {16 - ran} cases not started *"])


def test_the_cap_is_one_spend_for_xdist_workers(paid: pytest.Pytester) -> None:
    _xdist(paid)


def test_the_cap_is_kept_in_redis(paid: pytest.Pytester, redis_url: str) -> None:  # noqa: F811
    _xdist(paid, "--agent-eval-rate-limit-url", redis_url)
