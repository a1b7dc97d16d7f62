"""A failed case's text, as pytest shows it.

A count line, every check with ✓/✗, diffs for the failed ones, the calls, the location.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_agent_eval.text import bounded_repr, bounded_text

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import CaseResult, TrialResult

_INDENT = "    "


def _value(value: Any) -> str:
    text = bounded_text(value)
    return text.replace("\n", "\n" + " " * (len(_INDENT) + 12))


def trial_summary(trial: TrialResult, min_score: float | None) -> str:
    """How many of the trial's ✓/✗ lines are ✗, and its score.

    The lines are the checks, the violations and the agent's error.
    """
    if trial.summary:  # a conversation: its composite with every part, or why there is none
        return trial.summary
    if trial.run.error and not trial.checks and not trial.violations:
        return "the agent failed, nothing was checked (score 0.00)"
    failed = sum(not c.passed for c in trial.checks) + len(trial.violations) + bool(trial.run.error)
    total = len(trial.checks) + len(trial.violations) + bool(trial.run.error)
    counts = f"{failed} of {total} checks failed"
    errors = sum(c.error for c in trial.checks)
    if errors:  # no verdict: any score would be made up
        return f"{counts}, {errors} without a verdict (no score)"
    if min_score is not None and trial.score < min_score:
        return f"score {trial.score:.2f} below min_score {min_score:g} ({counts})"
    return f"{counts} (score {trial.score:.2f})"


def summary(result: CaseResult) -> str:
    """The one-line summary of a failed case: counts, never a message of its own.

    A message is on its ✗ line.
    """
    case = result.case
    if len(result.trials) > 1:
        return (
            f"case {case.id} failed: {result.passes}/{len(result.trials)} trials passed "
            f"(min_pass_rate {case.min_pass_rate:g})"
        )
    return f"case {case.id} failed: {trial_summary(result.trials[0], case.min_score)}"


def trial_lines(trial: TrialResult) -> list[str]:
    """Every check with ✓/✗, and the tool calls once.

    Expected against actual for the failed checks.
    """
    lines: list[str] = []
    if trial.run.error:
        lines.append(f"  ✗ {trial.run.error}")
        if trial.run.traceback:
            lines.extend("      " + line for line in trial.run.traceback.splitlines())
    for check in trial.checks:
        if check.passed:
            note = " (not scored)" if not check.scored else ""
            lines.append(f"  ✓ {check.name}{note}")
            if not check.scored and check.message:
                lines.append(f"{_INDENT}  {check.message}")
            continue
        score = f" (score {check.score:.2f})" if check.scored else ""
        lines.append(f"  ✗ {check.name}: {check.message or 'failed'}{score}")
        lines.append(f"{_INDENT}  expected: {_value(check.expected)}")
        lines.append(f"{_INDENT}  actual:   {_value(check.actual)}")
        lines.extend(f"{_INDENT}  {d}" for d in check.detail)
    lines.extend(f"  ✗ {v}" for v in trial.violations)
    if trial.run.tool_calls or not trial.run.error:
        from pytest_agent_eval.checks.tools import calls_table

        lines.append("  calls:")
        lines.extend(f"{_INDENT}{line}" for line in calls_table(trial.run.tool_calls))
    return lines


def transcript_lines(history: list[dict[str, Any]]) -> list[str]:
    """One line per message, with the response time where it was measured."""
    lines = []
    for n, message in enumerate(history, 1):
        took = f" ({message['latency_s']:.3f} s)" if "latency_s" in message else ""
        lines.append(f"{n:>2}. {message.get('role', '?')}{took}: {message.get('content', '')}")
    return lines


def failure_lines(result: CaseResult, verbose: int = 0) -> list[str]:
    """The whole failure text of a case, as lines.

    The ``-v`` details are report sections: see :func:`details`.
    """
    case = result.case
    lines = [summary(result)]
    if len(result.trials) > 1:
        first = result.trials.index(result.shown_trial) + 1
        for n, trial in enumerate(result.trials, 1):
            if not trial.passed and n != first:
                lines.append(f"  trial {n}: {trial_summary(trial, case.min_score)}")
        lines.append(
            f"first failing trial (#{first}): {trial_summary(result.shown_trial, case.min_score)}"
        )
    lines.extend(trial_lines(result.shown_trial))
    if case.metadata:
        lines.append(f"  metadata: {bounded_repr(case.metadata)}")
    lines.append(f"{case.path}:{case.line}: {case.id}")
    return lines


def details(result: CaseResult) -> list[tuple[str, str]]:
    """The ``-v`` report sections of a case's shown trial.

    The agent's full output and every tool call in full.
    """
    run = result.shown_trial.run
    calls = [
        f"{n:>2}. {c.describe()} "
        + (f"raised {c.error}" if c.error is not None else f"-> {c.result!r}")
        for n, c in enumerate(run.tool_calls, 1)
    ]
    sections = [
        ("agent output", run.output or "(empty)"),
        ("tool calls", "\n".join(calls) or "(no tool calls)"),
    ]
    if run.history:
        sections.append(("transcript", "\n".join(transcript_lines(run.history))))
    return sections
