"""Golden-set JSON (SPEC §12): a list of decision cases and QA cases, each with ``id``, ``input``.

Decision case: ``expected: {tools_used, allocation_valid, reason_contains, constraints}``. QA case:
``expected_contains`` (or an ``expected`` list) and ``must_not_contain``. Text matches are
case-insensitive; ``tools_used`` compares sets; ``constraints`` are shown with a failure, not
checked.
"""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import (
    Ids,
    Problems,
    build_case,
    explicit_id,
    item_keys,
    pretty,
)
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, PathKey

NAME = "golden_set"
ITEM_KEYS = ("id", "input", "expected", "expected_contains", "must_not_contain")
DECISION_KEYS = ("tools_used", "allocation_valid", "reason_contains", "constraints")
_SIGNS = frozenset({"expected", "expected_contains", "must_not_contain"})
NEED = "a list of {id, input, expected | expected_contains | must_not_contain}"


def detect(data: Any) -> tuple[bool, str]:
    """A list of mappings with ``input`` (not ``prompt``), at least one with an expectation key."""
    keys, why = item_keys(data, NEED)
    if why:
        return False, why
    if "input" not in keys or "prompt" in keys:
        return (
            False,
            f"{NEED} (items have no `input`)"
            if "input" not in keys
            else f"{NEED} (items use `prompt`)",
        )
    if not _SIGNS & keys:
        return False, f"{NEED} (no item has `expected`, `expected_contains` or `must_not_contain`)"
    return True, ""


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """Build one case per item; a bad item becomes an error case and the rest still run."""
    ids = Ids()
    cases = [_case(doc, raw, (index,), index, ids) for index, raw in enumerate(doc.data)]
    return LoadedFile(doc.path, NAME, cases)


def _case(doc: Document, raw: dict[str, Any], key: PathKey, index: int, ids: Ids) -> Case:
    line = doc.line(key)
    problems = Problems(doc)
    if "id" in raw:
        case_id, original = explicit_id(raw["id"], line, ids, problems, (*key, "id"))
    else:
        case_id, original = ids.derive(f"case-{index + 1}", line), None
        problems.add(
            key, f"{pretty(key)}: missing `id` (each case needs an id, unique within the file)"
        )
    problems.case_id = case_id
    problems.unknown_keys(raw, ITEM_KEYS, key, "case")
    query = problems.string(raw, "input", key, "the prompt sent to the agent")
    expected = raw.get("expected")
    expect: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    if isinstance(expected, dict):
        kind = "decision"
        _decision(problems, expected, (*key, "expected"), expect, metadata)
    else:
        kind = "qa"
        contains = problems.str_list(raw, "expected_contains", key)
        if expected is not None:
            if "expected_contains" in raw:
                problems.add(
                    (*key, "expected"),
                    f"{pretty(key)}: give `expected_contains` or `expected`, not both",
                )
            contains = problems.str_list(raw, "expected", key)
        if contains:
            expect["contains"] = contains
    forbidden = problems.str_list(raw, "must_not_contain", key)
    if forbidden:
        expect["not_contains"] = forbidden
    return build_case(
        doc,
        key,
        case_id,
        problems,
        NAME,
        query=query or "",
        description=original,
        expect=expect,
        tags=(kind,),
        metadata=metadata,
    )


def _decision(
    problems: Problems,
    expected: dict[str, Any],
    key: PathKey,
    expect: dict[str, Any],
    metadata: dict[str, Any],
) -> None:
    """Read ``expected`` of a decision case into checks and constraints.

    The checks go into ``expect``, the constraints into ``metadata``.
    """
    problems.unknown_keys(expected, DECISION_KEYS, key, "decision `expected`")
    tools = problems.str_list(expected, "tools_used", key)
    if tools is not None:
        expect["tools_exactly"] = tools
    valid = expected.get("allocation_valid")
    if isinstance(valid, bool):
        expect["allocation_valid"] = valid
    elif valid is not None:
        problems.add(
            (*key, "allocation_valid"), f"{pretty(key)}.allocation_valid: expected true or false"
        )
    reasons = problems.str_list(expected, "reason_contains", key)
    if reasons:
        expect["contains"] = reasons
    constraints = problems.str_list(expected, "constraints", key)
    if constraints:
        metadata["constraints"] = constraints


DIALECT = Dialect(NAME, detect, load)
