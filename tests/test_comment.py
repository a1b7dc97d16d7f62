"""``agent-eval comment REPORT [--baseline B]`` (SPEC §25): a report's sticky PR comment."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report_baseline import BASE_SUITE, CAND_SUITE

from pytest_agent_eval.cli import main
from pytest_agent_eval.report.comment import MARKER

PRICED = BASE_SUITE.replace("{say: hello", "{usage: {cost: 0.5}, say: hello")
PRICED_CAND = CAND_SUITE.replace("{say: hello", "{usage: {cost: 0.25}, say: hello")


@pytest.fixture
def reports(pytester: pytest.Pytester) -> pytest.Pytester:
    from report_support import USAGE_AGENT

    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_s=PRICED)
    pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "base.json")
    pytester.makefile(".yaml", eval_s=PRICED_CAND)
    pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "cand.json")
    return pytester


def test_the_comment_puts_the_verdict_regressions_fixes_and_cost_first(
    reports: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["comment", str(reports.path / "cand.json"), "--baseline", str(reports.path / "base.json")]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == MARKER
    assert lines[1] == "### ❌ agent eval: 1 regressions; 3/4 passed"
    assert lines[3].startswith("suite: 2/3 -> 2/3 cases passed; McNemar 1 harmful, 1 beneficial")
    body = "\n".join(lines)
    regressions = body.index("**Regressions (1)**")
    fixes = body.index("**Fixes (1)**")
    cost = body.index("**Cost:** $0.7500 (baseline $1.5000, -0.7500)")
    failures = body.index("**Failures (1)**")
    folded = body.index("<details><summary>The whole summary</summary>")
    assert regressions < fixes < cost < failures < folded
    assert "| `eval_s.yaml::breaks` | passed -> failed |" in body
    assert "| `eval_s.yaml::heals` | failed -> passed |" in body
    assert "| `eval_s.yaml::breaks` | contains: " in body
    assert body.rstrip().endswith("</details>")
    assert out.count(MARKER) == 1


def test_without_a_baseline_the_comment_counts_the_run(
    reports: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["comment", str(reports.path / "base.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [MARKER, "### ❌ agent eval: 3/4 passed"]
    assert "**Cost:** $1.5000" in lines


def test_an_unusable_report_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "r.json"
    bad.write_text("{")
    assert main(["comment", str(bad)]) == 2
    assert "r.json: not JSON" in capsys.readouterr().err
