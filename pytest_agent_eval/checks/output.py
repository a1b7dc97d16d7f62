"""Checks on the agent's output text.

The checks: contains, contains_any, not_contains, regex, not_regex, equals.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord

if TYPE_CHECKING:  # the regex machinery loads with the first regex check
    from pytest_agent_eval.checks.patterns import Found

STRINGS = {
    "type": ["string", "array"],
    "items": {"type": "string"},
}  # a string or a list of strings
_EXCERPT = 60


def _as_list(spec: Any) -> list[str]:
    return [spec] if isinstance(spec, str) else [str(s) for s in spec]


def _fold(text: str, ctx: CheckContext) -> str:
    return text if ctx.options.get("case_sensitive") else text.casefold()


def excerpt(output: str, phrase: str, case_sensitive: bool = False) -> list[str]:
    """The output around where ``phrase`` was expected.

    That is around its longest leading part found, else the start.
    """
    hay = output if case_sensitive else output.casefold()
    needle = phrase if case_sensitive else phrase.casefold()
    at, found = 0, ""
    words = needle.split()
    for n in range(len(words), 0, -1):  # longest run of leading words that does occur
        part = " ".join(words[:n])
        i = hay.find(part)
        if i >= 0:
            at, found = i, part
            break
    start = max(0, at - _EXCERPT)
    end = min(len(output), at + len(found or needle) + _EXCERPT)
    snippet = output[start:end].replace("\n", "⏎")
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(output) else ""
    lines = [f"output: {prefix}{snippet}{suffix}"]
    if found:
        lines.append(
            " " * (len("output: ") + len(prefix) + at - start)
            + "^" * len(found)
            + f" closest: {found!r}"
        )
    elif not output:
        lines = ["output: (empty)"]
    return lines


def _split(run: RunRecord, spec: Any, ctx: CheckContext) -> tuple[list[str], list[str], list[str]]:
    """The phrases of ``spec``: all of them, those found in the output, and those not found."""
    phrases = _as_list(spec)
    hay = _fold(run.output, ctx)
    found = [p for p in phrases if _fold(p, ctx) in hay]
    return phrases, found, [p for p in phrases if p not in found]


def _excerpts(run: RunRecord, phrases: list[str], what: str, ctx: CheckContext) -> list[str]:
    """For each phrase, ``<what> 'phrase'`` and the output around it.

    Or around where it was expected.
    """
    lines: list[str] = []
    for p in phrases:
        lines.append(f"{what} {p!r}")
        lines.extend(
            "  " + line for line in excerpt(run.output, p, bool(ctx.options.get("case_sensitive")))
        )
    return lines


def contains(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Every string occurs in the output."""
    phrases, _, missing = _split(run, spec, ctx)
    detail = _excerpts(run, missing, "missing", ctx)
    return CheckResult.of(
        "contains",
        not missing,
        score=(len(phrases) - len(missing)) / len(phrases) if phrases else 1.0,
        expected=phrases,
        actual=missing and f"missing {missing}",
        message=f"output lacks {', '.join(repr(m) for m in missing)}" if missing else "",
        detail=detail,
    )


def contains_any(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """At least one string occurs in the output."""
    phrases, hit, _ = _split(run, spec, ctx)
    detail = (
        []
        if hit
        else excerpt(
            run.output, phrases[0] if phrases else "", bool(ctx.options.get("case_sensitive"))
        )
    )
    return CheckResult.of(
        "contains_any",
        bool(hit),
        expected=phrases,
        actual=hit or "none found",
        message="" if hit else f"output has none of {phrases}",
        detail=detail,
    )


def not_contains(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """No string occurs in the output."""
    phrases, found, _ = _split(run, spec, ctx)
    detail = _excerpts(run, found, "found", ctx)
    return CheckResult.of(
        "not_contains",
        not found,
        score=(len(phrases) - len(found)) / len(phrases) if phrases else 1.0,
        expected=f"none of {phrases}",
        actual=found or "none found",
        message=f"output contains {', '.join(repr(f) for f in found)}" if found else "",
        detail=detail,
    )


def _regex_flags(ctx: CheckContext) -> int:
    return 0 if ctx.options.get("case_sensitive", True) else re.IGNORECASE


def _search(name: str, spec: Any, run: RunRecord, ctx: CheckContext) -> Found | None:
    """Where the pattern matches the output (``None``: nowhere).

    No verdict when the search does not finish.
    """
    from pytest_agent_eval.checks.patterns import DEFAULT_LIMIT, PatternTimeout, search

    limit = ctx.case.timeout if ctx.case.timeout is not None else DEFAULT_LIMIT
    try:
        return search(str(spec), run.output, _regex_flags(ctx), limit)
    except PatternTimeout as exc:
        raise PatternTimeout(f"check {name} {exc}") from None


def regex(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """``re.search`` finds the pattern in the output."""
    m = _search("regex", spec, run, ctx)
    return CheckResult.of(
        "regex",
        m is not None,
        expected=f"/{spec}/",
        actual=m.group(0) if m else "no match",
        message="" if m else f"output does not match /{spec}/",
        detail=[] if m else excerpt(run.output, ""),
    )


def not_regex(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """``re.search`` does not find the pattern in the output."""
    m = _search("not_regex", spec, run, ctx)
    return CheckResult.of(
        "not_regex",
        m is None,
        expected=f"no match of /{spec}/",
        actual=m.group(0) if m else "no match",
        message=f"output matches /{spec}/ at {m.group(0)!r}" if m else "",
    )


def equals(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The stripped output equals the string."""
    want, got = str(spec).strip(), run.output.strip()
    ok = (
        want == got
        if ctx.options.get("case_sensitive", True)
        else want.casefold() == got.casefold()
    )
    return CheckResult.of(
        "equals", ok, expected=want, actual=got, message="" if ok else "output differs"
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "contains", contains, STRINGS, "every string occurs in the output", blocking=False
    )
    registry.register(
        "contains_any", contains_any, STRINGS, "at least one string occurs", blocking=False
    )
    registry.register("not_contains", not_contains, STRINGS, "no string occurs", blocking=False)
    # blocking: a search may wait on its helper process up to the case's timeout (patterns.py)
    registry.register(
        "regex", regex, {"type": "string", "format": "regex"}, "re.search finds the pattern"
    )
    registry.register(
        "not_regex", not_regex, {"type": "string", "format": "regex"}, "re.search finds nothing"
    )
    registry.register(
        "equals",
        equals,
        {"type": "string"},
        "the stripped output equals the string",
        blocking=False,
    )
