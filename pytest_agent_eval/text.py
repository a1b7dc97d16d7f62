"""Values rendered into reports, bounded.

A value from an eval file or an agent can be huge or nested deep.
"""

from __future__ import annotations

import pprint
import re
from typing import Any

LIMIT = 4000
"""Characters of one rendered value; the rest is cut, with a note saying how much was shown."""
_LEVELS = 20


def bounded_repr(value: Any, limit: int = LIMIT) -> str:
    """``repr(value)`` cut to about ``limit`` characters.

    In time proportional to ``limit``, not to the value.

    Containers are walked only as far as the budget lasts (shared parts, such as YAML aliases, are
    not expanded past it), nesting below 20 levels reads as ``...``, and strings are cut before they
    are quoted.
    """
    return _bounded(value, limit)[0]


def _bounded(value: Any, limit: int) -> tuple[str, bool]:
    """The bounded repr and whether it was cut."""
    out: list[str] = []
    left = limit

    def emit(text: str) -> None:
        nonlocal left
        out.append(text)
        left -= len(text)

    def walk(item: Any, level: int) -> None:
        if left <= 0:
            return
        if isinstance(item, dict):
            if level >= _LEVELS:
                emit("{...}")
                return
            emit("{")
            for n, (key, val) in enumerate(item.items()):
                if left <= 0:
                    break
                emit(", " if n else "")
                walk(key, level + 1)
                emit(": ")
                walk(val, level + 1)
            emit("}")
        elif isinstance(item, (list, tuple)):
            opening, closing = ("[", "]") if isinstance(item, list) else ("(", ")")
            if level >= _LEVELS:
                emit(f"{opening}...{closing}")
                return
            emit(opening)
            for n, val in enumerate(item):
                if left <= 0:
                    break
                emit(", " if n else "")
                walk(val, level + 1)
            emit(closing)
        elif isinstance(item, str):
            emit(repr(item[: left + 1]))
        else:
            emit(repr(item)[: left + 1])

    walk(value, 0)
    text = "".join(out)
    return (
        (text, False) if left >= 0 else (f"{text[:limit]}... (cut at {limit:,} characters)", True)
    )


def bounded_text(value: Any, limit: int = LIMIT, width: int = 100) -> str:
    """A string as it is, anything else pretty-printed; either cut to about ``limit`` characters."""
    if isinstance(value, str):
        return (
            value
            if len(value) <= limit
            else f"{value[:limit]}... (cut at {limit:,} of {len(value):,} characters)"
        )
    short, cut = _bounded(value, limit)
    if cut:
        return short
    return pprint.pformat(value, width=width, compact=True)  # small: its repr fits in the limit


def text_table(rows: list[tuple[str, ...]], align_left: int = 1) -> list[str]:
    """Rows as aligned text.

    The first ``align_left`` columns left-aligned, the others right-aligned (figures); trailing
    spaces cut.
    """
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i < align_left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


# C0 and C1 control characters but newline and tab, and the bidirectional overrides (they reorder
# what is shown)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal.

    Control characters (an escape sequence that retitles the terminal or moves the cursor, a
    carriage return) and lone surrogates (which no terminal or report can encode) are shown escaped,
    as ``\\x1b``, ``\\ud83d``; newlines and tabs stay.
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def one_line(text: str) -> str:
    """:func:`printable`, newlines and tabs escaped too.

    A line of terminal output from data (a report's node id).
    """
    return printable(text).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
