"""Readings of the answer from existing eval formats: ``answer``, ``answered``, ``allocation_valid``."""

from __future__ import annotations

import re
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry, CheckResult
from pytest_agent_eval.checks.outcome import phrase_pattern, read_outcome
from pytest_agent_eval.checks.output import excerpt
from pytest_agent_eval.record import RunRecord

ALLOCATION_SUCCESS = ("allocated", "booked", "scheduled", "found", "successfully", "available", "success")
ALLOCATION_FAILURE = ("not found", "unavailable", "failed", "cannot", "no dynos", "invalid", "error", "required")
"""The golden-set home project's word lists (SPEC §12); a word also matches its longer forms (errors)."""
_ALLOCATION = (
    phrase_pattern(ALLOCATION_SUCCESS, longer_forms=True),
    phrase_pattern(ALLOCATION_FAILURE, longer_forms=True),
)
_NUMBER = re.compile(r"^[-+]?\d+(?:[.,]\d+)*$")


def answer_pattern(expected: str | float) -> re.Pattern[str]:
    """Where ``expected`` occurs in an answer: a number only as a whole number ("4" is not in "14" or "4.5")."""
    text = str(expected).strip()
    if isinstance(expected, (int, float)) or _NUMBER.match(text):
        return re.compile(rf"(?<![\w.,]){re.escape(text)}(?![\w]|[.,]\d)")
    return re.compile(re.escape(text), re.IGNORECASE)


def answer(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The expected answer occurs in the output (case-insensitive; a number only as a whole number)."""
    match = answer_pattern(spec).search(run.output)
    return CheckResult.of(
        "answer",
        match is not None,
        expected=str(spec),
        actual=match.group(0) if match else "not found",
        message="" if match else f"output does not contain the answer {str(spec)!r}",
        detail=[] if match else excerpt(run.output, str(spec)),
    )


def answered(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The agent gave a non-empty answer (whitespace alone is empty)."""
    ok = bool(run.output.strip())
    return CheckResult.of(
        "answered",
        ok,
        expected="a non-empty answer",
        actual=f"{len(run.output.strip())} characters" if ok else "(empty)",
        message="" if ok else "the agent finished without an answer (empty output)",
    )


def allocation_valid(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """``true``: the answer reads as a successful allocation (a success word, no failure phrase); ``false``: it
    does not (it may read as failure, or as neither: "There are 42 completed tests.").

    Failure phrases win, and are whole phrases: "not found" is never read as "found", "unavailable" never as
    "available".
    """
    reading, phrase = read_outcome(run.output, *_ALLOCATION)
    why = f"reads as {reading}" + (f" ({phrase!r})" if phrase else " (no success or failure phrase)")
    ok = reading == "success" if spec else reading != "success"
    want = "reads as success" if spec else "does not read as success"
    return CheckResult.of(
        "allocation_valid",
        ok,
        expected=f"{want} (allocation_valid: {'true' if spec else 'false'})",
        actual=why,
        message="" if ok else f"answer {why}",
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "answer",
        answer,
        {"type": ["string", "number"]},
        "the answer occurs in the output (case-insensitive; a number only as a whole number)",
        blocking=False,
    )
    registry.register("answered", answered, {"const": True}, "the agent gave a non-empty answer", blocking=False)
    registry.register(
        "allocation_valid",
        allocation_valid,
        {"type": "boolean"},
        "true: the answer reads as a successful allocation; false: it does not (failure phrases always win)",
        blocking=False,
    )
