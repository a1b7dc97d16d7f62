"""Readings of the answer from existing eval formats.

The checks: ``answer``, ``answered``, ``allocation_valid``, ``matches_reference`` (a dataset row's
reference answer).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.checks.outcome import phrase_pattern, read_outcome
from pytest_agent_eval.checks.output import excerpt
from pytest_agent_eval.core.results import CheckResult, RunRecord

ALLOCATION_SUCCESS = (
    "allocated",
    "booked",
    "scheduled",
    "found",
    "successfully",
    "available",
    "success",
)
ALLOCATION_FAILURE = (
    "not found",
    "unavailable",
    "failed",
    "cannot",
    "no dynos",
    "invalid",
    "error",
    "required",
)
"""The golden-set home project's word lists (SPEC §12).

A word also matches its longer forms (errors).
"""


@functools.cache
def _allocation() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The word lists as patterns (a word matches its longer forms), compiled on first use."""
    return (
        phrase_pattern(ALLOCATION_SUCCESS, longer_forms=True),
        phrase_pattern(ALLOCATION_FAILURE, longer_forms=True),
    )


_SIGNS = "+-\u2212"  # "−" (U+2212) is the typographic minus
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
"""A number without its sign, thousands grouped by commas or not, a decimal point or not.

For example ``1,000.5``.
"""
_SIGNED = re.compile(rf"([-+\u2212]?)({_DIGITS})")
_IN_TEXT = re.compile(rf"(?<![\w.,]){_DIGITS}(?!\w|[.,]\d)")
"""A number in running text: never part of a word or of a longer number.

"4" is not in "14", "4.5", "v4".
"""
_NUMBER_LIKE = re.compile(r"^[-+]?\d+(?:[.,]\d+)*$")


def _value(sign: str, digits: str) -> Decimal:
    value = Decimal(digits.replace(",", ""))
    return -value if sign and sign != "+" else value


def number_value(text: str) -> Decimal | None:
    """The value of ``text`` if it is one number as written, else ``None``.

    Numbers as written: ``"4"``, ``"-4.0"``, ``"1,000"``.
    """
    match = _SIGNED.fullmatch(text.strip())
    return _value(match.group(1), match.group(2)) if match else None


def numbers_in(text: str) -> list[tuple[str, Decimal]]:
    """Every number written in ``text``, as written and as a value.

    "-4" is minus four, "4.0" is four.

    A sign is one right before the digits, not after a letter or digit: "3-4" holds 3 and 4, "x =
    -4" minus four.
    """
    found = []
    for match in _IN_TEXT.finditer(text):
        at = match.start()
        sign = text[at - 1] if at and text[at - 1] in _SIGNS else ""
        if sign and at > 1 and re.match(r"[\w.,]", text[at - 2]):
            sign = ""  # a hyphen or an operator: "3-4", "x-4", "2+4"
        found.append((sign + match.group(0), _value(sign, match.group(0))))
    return found


def find_answer(expected: str | float, output: str) -> tuple[str | None, list[tuple[str, Decimal]]]:
    """Where the expected answer is in ``output``, and the numbers the output holds.

    Returns ``(the expected answer as written in output, or None; the numbers the output holds when
    it is a number)``.

    A number matches a number of the same value, sign included: ``4`` matches "4", "4.0" and "+4",
    never "-4", "14" or "4.5". Anything else is text, found case-insensitively (a number-like text
    such as "4,5" only as a whole token).
    """
    text = str(expected).strip()
    want = number_value(text)
    if want is not None:
        numbers = numbers_in(output)
        return next((written for written, value in numbers if value == want), None), numbers
    if _NUMBER_LIKE.match(text):
        pattern = re.compile(rf"(?<![\w.,\u2212-]){re.escape(text)}(?!\w|[.,]\d)")
    else:
        pattern = re.compile(re.escape(text), re.IGNORECASE)
    match = pattern.search(output)
    return (match.group(0) if match else None), []


def answer(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The expected answer occurs in the output.

    A number as a number of the same value, sign included; text case-insensitively.
    """
    hit, numbers = find_answer(spec, run.output)
    if hit is not None:
        return CheckResult.of("answer", True, expected=str(spec), actual=hit)
    near = str(spec)
    actual = "not found"
    if numbers:
        shown = [written for written, _ in numbers]
        actual += (
            f"; numbers in the output: {', '.join(shown[:10])}{' …' if len(shown) > 10 else ''}"
        )
        want = number_value(str(spec)) or 0
        # the output around a number of the same size but the other sign, else its start: never a
        # digit inside
        # another number ("4" in "14")
        near = next((written for written, value in numbers if abs(value) == abs(want)), "")
    return CheckResult.of(
        "answer",
        False,
        expected=str(spec),
        actual=actual,
        message=f"output does not contain the answer {str(spec)!r}",
        detail=excerpt(run.output, near),
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
    """Whether the answer reads as a successful allocation, as ``allocation_valid`` says it should.

    ``true``: the answer reads as a successful allocation (a success word, no failure phrase);
    ``false``: it does not (it may read as failure, or as neither: "There are 42 completed tests.").

    Failure phrases win, and are whole phrases: "not found" is never read as "found", "unavailable"
    never as "available".
    """
    reading, phrase = read_outcome(run.output, *_allocation())
    why = f"reads as {reading}" + (
        f" ({phrase!r})" if phrase else " (no success or failure phrase)"
    )
    ok = reading == "success" if spec else reading != "success"
    want = "reads as success" if spec else "does not read as success"
    return CheckResult.of(
        "allocation_valid",
        ok,
        expected=f"{want} (allocation_valid: {'true' if spec else 'false'})",
        actual=why,
        message="" if ok else f"answer {why}",
    )


def matches_reference(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The output equals (stripped) or contains the case's reference answer.

    The reference is a dataset row's; for a list of facts: equals one, or contains every one.
    Compared case-insensitively unless ``case_sensitive: true``; "not scored" for a case without
    one.
    """
    reference = ctx.case.reference
    if reference is None:
        return CheckResult(
            "matches_reference",
            True,
            0.0,
            spec,
            "no reference",
            "not scored: the case has no reference answer (a dataset row's expected output)",
            scored=False,
        )
    fold = (lambda t: t) if ctx.options.get("case_sensitive") else str.casefold
    output = fold(run.output.strip())
    facts = [
        fold(str(fact).strip())
        for fact in ([reference] if isinstance(reference, str) else reference)
    ]
    # a list of facts (a case's ``reference:``): the output equals one of them, or contains every
    # one; a list of
    # alternatives (inspect_ai's targets): the output equals or contains any one of them
    if spec == "equals":
        ok = output in facts
    else:
        ok = (any if ctx.case.reference_any else all)(fact in output for fact in facts)
    what = "equal" if spec == "equals" else "contain"
    shown = repr(reference)
    if ctx.case.reference_any and not isinstance(reference, str):
        shown = " or ".join(repr(r) for r in reference)
    return CheckResult.of(
        "matches_reference",
        ok,
        expected=f"output {what}s {shown}",
        actual=run.output,
        message="" if ok else f"output does not {what} the reference answer {shown}",
        detail=[]
        if ok or spec == "equals" or not isinstance(reference, str)
        else excerpt(run.output, reference),
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "matches_reference",
        matches_reference,
        {"enum": ["equals", "contains"]},
        "the output equals / contains the case's reference answer "
        "(a dataset row's expected output)",
        blocking=False,
    )
    registry.register(
        "answer",
        answer,
        {"type": ["string", "number"]},
        "the answer occurs in the output (text case-insensitively; "
        "a number by value, sign included: 4 is 4.0, "
        "not -4, 14 or 4.5)",
        blocking=False,
    )
    registry.register(
        "answered", answered, {"const": True}, "the agent gave a non-empty answer", blocking=False
    )
    registry.register(
        "allocation_valid",
        allocation_valid,
        {"type": "boolean"},
        "true: the answer reads as a successful allocation; "
        "false: it does not (failure phrases always win)",
        blocking=False,
    )
