"""Does the output read as success or failure? Failure phrases always win over success words."""

from __future__ import annotations

import functools
import re
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord

SUCCESS_WORDS = (
    "success", "successful", "successfully", "succeeded", "completed", "complete", "done",
    "confirmed", "approved", "allocated", "assigned", "booked", "scheduled", "created", "found",
    "here is", "here are",
)  # fmt: skip
FAILURE_WORDS = (
    "not found", "no results", "unavailable", "not available", "cannot", "can't", "could not",
    "couldn't", "unable", "failed", "failure", "error", "denied", "rejected", "refused",
    "insufficient", "invalid",
    "no capacity", "not possible", "impossible", "sorry",
)  # fmt: skip


def phrase_pattern(
    words: list[str] | tuple[str, ...], *, longer_forms: bool = False
) -> re.Pattern[str]:
    """The phrases as whole words.

    With ``longer_forms`` a phrase also matches as a word's start (error, errors).
    """
    alts = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    end = r"\w*" if longer_forms else r"(?!\w)"
    return re.compile(rf"(?<!\w)(?:{alts}){end}", re.IGNORECASE)


@functools.cache
def _default() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The default word lists as patterns, compiled on first use."""
    return phrase_pattern(SUCCESS_WORDS), phrase_pattern(FAILURE_WORDS)


def read_outcome(
    text: str, success: re.Pattern[str] | None = None, failure: re.Pattern[str] | None = None
) -> tuple[str, str | None]:
    """How ``text`` reads: ``("failure", phrase)``, ``("success", word)`` or ``("unclear", None)``.

    Failure phrases win.
    """
    success = success or _default()[0]
    failure = failure or _default()[1]
    bad = failure.search(text)
    if bad:
        return "failure", bad.group(0)
    good = success.search(text)
    if good:
        return "success", good.group(0)
    return "unclear", None


def outcome(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The output reads as success / failure (configurable keyword lists)."""
    if isinstance(spec, dict):
        want = spec["expected"]
        success = phrase_pattern(spec["success_words"]) if "success_words" in spec else None
        failure = phrase_pattern(spec["failure_words"]) if "failure_words" in spec else None
    else:
        want, success, failure = spec, None, None
    got, word = read_outcome(run.output, success, failure)
    ok = got == want
    why = f"reads as {got}" + (f" ({word!r})" if word else " (no success or failure phrase)")
    return CheckResult.of(
        "outcome", ok, expected=want, actual=why, message="" if ok else f"output {why}"
    )


SCHEMA = {  # "success" / "failure", or a mapping with own word lists
    "type": ["string", "object"],
    "pattern": "^(success|failure)$",
    "properties": {
        "expected": {"enum": ["success", "failure"]},
        "success_words": {"type": "array", "items": {"type": "string"}},
        "failure_words": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["expected"],
    "additionalProperties": False,
}


def register(registry: CheckRegistry) -> None:
    registry.register(
        "outcome", outcome, SCHEMA, "the output reads as success or failure", blocking=False
    )
