"""The "Testing prompt injection" and "Trusting your judge" guides' examples, run as written.

The guides are docs/guide/injection.md and docs/guide/judges.md: the files their "Try it" sections
name go into a fresh directory, and a run there shows what the page says.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs" / "guide"


def _files(page: str) -> dict[str, str]:
    """The page's fenced blocks whose first line names their file (``# agents.py``), last wins."""
    found = {}
    for block in re.findall(r"```\w+\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.S):
        first, _, _ = block.partition("\n")
        if re.fullmatch(r"# [\w.]+\.(py|yaml)", first):
            found[first[2:]] = block
    return found


def _write(pytester: pytest.Pytester, page: str, *names: str) -> None:
    files = _files(page)
    for name in names:
        (pytester.path / name).write_text(files[name], encoding="utf-8")
    pytester.syspathinsert()


def test_the_injection_guide(pytester: pytest.Pytester) -> None:
    _write(pytester, "injection.md", "travel_agents.py", "eval_attack.yaml")
    guarded = pytester.runpytest_inprocess("-p", "no:cacheprovider", "eval_attack.yaml")
    guarded.assert_outcomes(passed=13)
    naive = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "eval_attack.yaml", "--agent", "travel_agents:naive"
    )
    naive.assert_outcomes(passed=1, failed=12)
    assert "the real" not in naive.stdout.str()
    assert "attack succeeded (exfiltration): the canary canary-" in naive.stdout.str()


def test_the_judges_guide(pytester: pytest.Pytester) -> None:
    _write(pytester, "judges.md", "conftest.py", "polite.calibration.yaml", "eval_polite.yaml")
    pytester.makepyfile(agent='def run(query, context):\n    return "a good reply"\n')
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--agent-eval-judge-min-kappa", "0.6"
    )
    result.assert_outcomes(passed=5)
    calibration = pytester.path / "polite.calibration.yaml"
    calibration.write_text(
        calibration.read_text().replace(
            '"a bad answer", label: fail', '"a bad answer", label: pass'
        )
    )
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--agent-eval-judge-min-kappa", "0.6", "-rA"
    )
    result.assert_outcomes(passed=3, failed=2)
    assert "is uncalibrated: Cohen's kappa 0.50 < 0.6 on 4 labelled items" in result.stdout.str()
