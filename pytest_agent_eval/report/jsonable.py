"""Values made JSON-able and bounded for reports.

An agent's output or a tool result can be huge or nested deep.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

TEXT_LIMIT = 4000
"""Characters of one string in a report; the rest is cut, with a note saying how much there was."""
ITEMS_LIMIT = 200
"""Entries of one list or mapping; the rest is cut, with a note."""
DEPTH_LIMIT = 12
"""Nesting levels; deeper values read as their type name."""

JSON = Any
"""A value made of dict (str keys), list, str, int, float, bool and None only."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def c_encoder(encoder: json.JSONEncoder) -> Callable[[Any, int], Any] | None:
    """The C encoder ``encoder.encode`` makes on each call, made once; ``None`` if there is none.

    Without the circular check (``markers`` None): what it encodes must be a tree.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None:
        return None
    ascii_only = encoder.ensure_ascii
    string = json.encoder.encode_basestring_ascii if ascii_only else json.encoder.encode_basestring
    try:
        made: Callable[[Any, int], Any] = make(
            None,
            encoder.default,
            string,
            None,
            encoder.key_separator,
            encoder.item_separator,
            encoder.sort_keys,
            encoder.skipkeys,
            encoder.allow_nan,
        )
    except TypeError:  # another Python's signature: the encoder's own way
        return None
    return made


_PLAIN = c_encoder(json.JSONEncoder())
"""``json.dumps``'s encoder (its default settings)."""


def dumps(data: JSON) -> str:
    """``json.dumps(data)`` of JSON data (a record), without the set-up it does on each call.

    ``RecursionError`` for data that contains itself (``json.dumps``: ``ValueError``).
    """
    if _PLAIN is None:
        return json.dumps(data)
    return "".join(_PLAIN(data, 0))


def encodable(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD, so that it is writable as UTF-8.

    A lone surrogate comes, for example, from an LLM reply cut inside an emoji.
    """
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else ``None`` (unknown)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` as it is, or its first ``limit`` characters with a note of the full length.

    The result is writable as UTF-8.
    """
    text = encodable(text)
    return (
        text
        if len(text) <= limit
        else f"{text[:limit]}... (cut at {limit:,} of {len(text):,} characters)"
    )


def jsonable(value: Any, limit: int = TEXT_LIMIT, depth: int = DEPTH_LIMIT) -> JSON:
    """``value`` as plain JSON data, bounded.

    Strings cut to ``limit``, containers to ``ITEMS_LIMIT`` entries and ``depth`` levels, anything
    else (objects, sets, bytes) as its bounded ``repr``.
    """
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
        )
    if isinstance(value, str):
        return cut(value, limit)
    if depth <= 0:
        return f"<{type(value).__name__} nested too deep>"
    if isinstance(value, dict):
        out: dict[str, JSON] = {}
        for n, (key, item) in enumerate(value.items()):
            if n == ITEMS_LIMIT:
                out["..."] = f"{len(value) - ITEMS_LIMIT} more entries cut"
                break
            out[encodable(key) if isinstance(key, str) else cut(repr(key))] = jsonable(
                item, limit, depth - 1
            )
        return out
    if isinstance(value, (list, tuple)):
        items = [jsonable(item, limit, depth - 1) for item in value[:ITEMS_LIMIT]]
        if len(value) > ITEMS_LIMIT:
            items.append(f"... {len(value) - ITEMS_LIMIT} more items cut")
        return items
    try:
        text = repr(value)
    except Exception as exc:  # a user object whose repr raises must not break the report
        text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    return cut(text, limit)
