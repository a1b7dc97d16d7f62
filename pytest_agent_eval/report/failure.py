"""The failure text of a case: a summary line, every check with ✓/✗, diffs for the failed ones, the location."""

from __future__ import annotations

import pprint
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.checks.tools import calls_table

if TYPE_CHECKING:
    from pytest_agent_eval.runner import CaseResult, TrialResult

_INDENT = "    "


class Passing:
    """What a case result is compared with; ``pytest_assertrepr_compare`` explains the difference."""

    def __repr__(self) -> str:
        return "passing"


PASSING = Passing()


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else pprint.pformat(value, width=100, compact=True)
    return text.replace("\n", "\n" + " " * (len(_INDENT) + 12))


def summary(result: CaseResult) -> str:
    """The one-line summary of a failed case."""
    case = result.case
    if case.repeat > 1:
        return (
            f"case {case.id} failed: {result.passes}/{len(result.trials)} trials passed "
            f"(min_pass_rate {case.min_pass_rate:g})"
        )
    trial = result.trials[0]
    if trial.run.error:
        return f"case {case.id} failed: {trial.run.error}"
    failed = [c for c in trial.checks if not c.passed]
    errors = [c for c in trial.checks if c.error]
    if errors:  # no verdict: the score would be made up
        more = f" (and {len(errors) - 1} more check(s) without a verdict)" if len(errors) > 1 else ""
        return f"case {case.id} failed: {errors[0].name} has no verdict: {errors[0].message}{more}"
    if case.min_score is not None:
        return f"case {case.id} failed: score {trial.score:.2f} below min_score {case.min_score:g}"
    if failed:
        return f"case {case.id} failed: {len(failed)} of {len(trial.checks)} checks failed (score {trial.score:.2f})"
    return f"case {case.id} failed: " + "; ".join(trial.reasons)


def trial_lines(trial: TrialResult) -> list[str]:
    """Every check with ✓/✗, and expected against actual for the failed ones."""
    lines: list[str] = []
    if trial.run.error:
        lines.append(f"  ✗ {trial.run.error}")
        if trial.run.traceback:
            lines.extend("      " + line for line in trial.run.traceback.splitlines())
    for check in trial.checks:
        if check.passed:
            note = " (not scored)" if not check.scored else ""
            lines.append(f"  ✓ {check.name}{note}")
            continue
        score = f" (score {check.score:.2f})" if check.scored else ""
        lines.append(f"  ✗ {check.name}: {check.message or 'failed'}{score}")
        lines.append(f"{_INDENT}  expected: {_value(check.expected)}")
        lines.append(f"{_INDENT}  actual:   {_value(check.actual)}")
        lines.extend(f"{_INDENT}  {d}" for d in check.detail)
    lines.extend(f"  ✗ {v}" for v in trial.violations)
    return lines


def failure_lines(result: CaseResult, verbose: int = 0) -> list[str]:
    """The whole failure text of a case, as lines."""
    case = result.case
    lines = [summary(result)]
    if case.repeat > 1:
        for n, trial in enumerate(result.trials, 1):
            if not trial.passed:
                lines.append(f"  trial {n}: " + "; ".join(trial.reasons))
        lines.append(f"first failing trial (#{result.trials.index(result.first) + 1}):")
    lines.extend(trial_lines(result.first))
    if case.metadata:
        lines.append(f"  metadata: {case.metadata}")
    if verbose > 0:
        run = result.first.run
        lines.append("agent output:")
        lines.extend("  " + line for line in (run.output or "(empty)").splitlines())
        lines.append("tool calls:")
        lines.extend("  " + line for line in calls_table(run.tool_calls))
    lines.append(f"{case.path}:{case.line}: {case.id}")
    return lines
