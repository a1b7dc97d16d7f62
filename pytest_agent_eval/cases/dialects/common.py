"""What the dialect loaders share: located problems per case, field checks, ids."""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from typing import Any

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.document import Document, PathKey, pretty_path
from pytest_agent_eval.core.errors import EvalFileError, did_you_mean
from pytest_agent_eval.core.names import ID_RE, TAG_RE, TAG_RULE, slugify

pretty = pretty_path
"""``("cases", 2, "scorers")`` -> ``cases[2].scorers``."""


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool, not ``.nan`` or ``.inf``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def item_keys(data: Any, need: str) -> tuple[set[str], str]:
    """For a format that is a list of mappings: the keys its items use.

    Or (empty, why ``data`` is not one).
    """
    if not isinstance(data, list) or not data:
        return set(), need
    if not all(isinstance(item, dict) for item in data):
        return set(), f"{need} (an item is not a mapping)"
    return set().union(*(item.keys() for item in data)), ""


class Problems:
    """Problems found in one part of a file, each at the line of the key it is about."""

    def __init__(self, doc: Document, case_id: str | None = None) -> None:
        self.doc = doc
        self.case_id = case_id
        self.errors: list[EvalFileError] = []

    def __bool__(self) -> bool:
        return bool(self.errors)

    def add(self, key: PathKey, message: str, case_id: str | None = None) -> None:
        """A problem at the line of ``key``, about ``case_id`` (else the part's own case)."""
        self.errors.append(
            EvalFileError(self.doc.path, self.doc.line(key), message, case_id or self.case_id)
        )

    def unknown_keys(
        self, raw: dict[str, Any], allowed: Collection[str], key: PathKey, what: str
    ) -> None:
        """One problem per key of ``raw`` that is not ``allowed``.

        Each names a did-you-mean or the allowed keys.
        """
        for name in raw:
            if name not in allowed:
                hint = (
                    did_you_mean(str(name), allowed) or f"; {what} keys are: {', '.join(allowed)}"
                )
                self.add((*key, name), f"unknown key {name!r} in {pretty(key)}{hint}")

    def require(self, raw: dict[str, Any], name: str, key: PathKey, what: str) -> bool:
        """A problem when ``raw`` lacks ``name``; whether it is there."""
        if name in raw:
            return True
        self.add(key, f"{pretty(key)}: missing `{name}` ({what})")
        return False

    def string(
        self, raw: dict[str, Any], name: str, key: PathKey, required: str | None = None
    ) -> str | None:
        """``raw[name]`` when it is a string; else a problem.

        A problem when it is not, or when ``required`` (what it is) and absent.
        """
        if required is not None and not self.require(raw, name, key, required):
            return None
        value = raw.get(name)
        if value is None or isinstance(value, str):
            return value
        self.add((*key, name), f"{pretty((*key, name))}: expected a string, got {value!r}")
        return None

    def str_list(self, raw: dict[str, Any], name: str, key: PathKey) -> list[str] | None:
        """``raw[name]`` when it is a list of strings (absent/null: None); a problem otherwise."""
        value = raw.get(name)
        if value is None or is_str_list(value):
            return value
        self.add((*key, name), f"{pretty((*key, name))}: expected a list of strings, got {value!r}")
        return None

    def tags(self, raw: dict[str, Any], name: str, key: PathKey) -> list[str]:
        """``raw[name]`` when it is a list of tags (pytest markers).

        A problem per item that is not one.
        """
        tags = self.str_list(raw, name, key) or []
        for i, tag in enumerate(tags):
            if not TAG_RE.match(tag):
                self.add(
                    (*key, name, i), f"{pretty((*key, name, i))}: {tag!r} is not a tag: {TAG_RULE}"
                )
        return [tag for tag in tags if TAG_RE.match(tag)]

    def regex(self, raw: dict[str, Any], name: str, key: PathKey) -> str | None:
        """``raw[name]`` when it is a valid regular expression; a problem otherwise."""
        value = raw.get(name)
        if value is None:
            return None
        where = pretty((*key, name))
        if not isinstance(value, str):
            self.add((*key, name), f"{where}: expected a regular expression string, got {value!r}")
            return None
        try:
            re.compile(value)
        except re.error as exc:
            self.add(
                (*key, name), f"{where}: bad regular expression {value!r}: {exc}; fix the pattern"
            )
            return None
        return value

    def number(
        self, raw: dict[str, Any], name: str, key: PathKey, low: float, high: float | None = None
    ) -> float | None:
        """``raw[name]`` when it is a number in range.

        ``low`` is exclusive when 0 and ``high`` is None.
        """
        value = raw.get(name)
        if value is None:
            return None
        where = pretty((*key, name))
        if not is_number(value):
            self.add((*key, name), f"{where}: expected a number, got {value!r}")
            return None
        if high is None and value <= low:
            self.add((*key, name), f"{where}: must be greater than {low:g}, got {value!r}")
            return None
        if high is not None and not low <= value <= high:
            self.add((*key, name), f"{where}: must be between {low:g} and {high:g}, got {value!r}")
            return None
        return float(value)

    def in_order(self) -> list[EvalFileError]:
        """The problems in the order of their lines."""
        return sorted(self.errors, key=lambda e: e.line or 0)

    def text(self) -> str:
        return "\n".join(e.format() for e in self.in_order())


class Ids:
    """Case ids of one file, for every format.

    Explicit ids must be unique (a repeat is the one "duplicate case id" problem, with a stand-in
    id); derived ones are made unique with ``-2``, ``-3``…
    """

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.names: dict[str, int] = {}

    def derive(self, name: str, line: int) -> str:
        """A new id from a name: its slug, made unique within the file."""
        return self.unique(slugify(name), line)

    def unique(self, base: str, line: int) -> str:
        """``base`` (already an id), made unique within the file."""
        case_id, n = base, 2
        while case_id in self.seen:
            case_id, n = f"{base}-{n}", n + 1
        self.seen[case_id] = line
        return case_id

    def name(self, name: str, line: int, problems: Problems, key: PathKey) -> None:
        """Record a case name that must be unique in its file; a repeat is a problem."""
        if name in self.names:
            problems.add(
                key,
                f"duplicate case name {name!r} (first at line {self.names[name]}); "
                "give each case a unique `name`",
            )
        self.names.setdefault(name, line)

    def claim(
        self, case_id: str, line: int, problems: Problems, key: PathKey, field: str = "id"
    ) -> str:
        """Record a file's own ``case_id`` (from its ``field``).

        A duplicate gets a problem and a unique stand-in id.
        """
        if case_id in self.seen:
            first = self.seen[case_id]
            stand_in = f"{case_id}-line{line}"
            message = (
                f"duplicate case id {case_id!r} (first at line {first}); "
                f"give each case a unique `{field}`"
            )
            problems.add(key, message, stand_in)
            case_id = stand_in
        self.seen[case_id] = line
        return case_id


def explicit_id(
    value: Any, line: int, ids: Ids, problems: Problems, key: PathKey, field: str = "id"
) -> tuple[str, str | None]:
    """A file's own id as the case id.

    The id is its ``field``: ``id``, a promptfoo test's ``description``. A duplicate is a problem
    naming the field; one that is not ``[A-Za-z0-9_-]+`` is slugified.

    Returns the case id and, when slugified, the original to keep as the description.
    """
    text = str(value)
    if ID_RE.match(text):
        return ids.claim(text, line, problems, key, field), None
    return ids.derive(text, line), text


def build_case(
    doc: Document, key: PathKey, case_id: str, problems: Problems, dialect: str, **fields: Any
) -> Case:
    """The case at ``key``; with problems, a case that reports them instead of running.

    The rest still run.
    """
    if problems:
        return Case(
            id=case_id, path=doc.path, line=doc.line(key), error=problems.text(), dialect=dialect
        )
    return Case(id=case_id, path=doc.path, line=doc.line(key), dialect=dialect, **fields)


def shorten(text: str, width: int = 80) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"
