"""Category JSON (SPEC §12): cases grouped under category names.

The shape: ``{category: [{input, expected, expected_behavior, expected_tools, tags, timeout}]}``.

The category is a tag and the id stem (``math_basic-1``…). Every case needs a non-empty answer;
``expected`` must occur in it (a number by value, sign included: "4" is "4.0", never "-4" or "14");
``expected_tools`` is scored (precision + recall) / 2 and fails at 0; ``expected_behavior`` is
judged when an LLM is configured; the response time is scored and reported.
"""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import (
    Ids,
    Problems,
    build_case,
    is_number,
    pretty,
    shorten,
)
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.checks.scorers import RESPONSE_TIME_BUDGET_S
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, PathKey
from pytest_agent_eval.core.names import slugify

NAME = "category_json"
ITEM_KEYS = ("input", "expected", "expected_behavior", "expected_tools", "tags", "timeout")
NEED = (
    "a mapping of category name to a list of "
    "{input, expected, expected_behavior, expected_tools, tags, timeout}"
)


def detect(data: Any) -> tuple[bool, str]:
    """Whether ``data`` maps categories to lists of mappings with only the item keys.

    One of the mappings has ``input``.

    A top-level ``cases`` key means the native format, never a category.
    """
    if not isinstance(data, dict) or not data:
        return False, NEED
    if "cases" in data:
        return False, f"{NEED} (a `cases:` key is the native format)"
    found_input = False
    for category, items in data.items():
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            return False, f"{NEED} ({category!r} is not a list of mappings)"
        for item in items:
            extra = [k for k in item if k not in ITEM_KEYS]
            if extra:
                return False, f"{NEED} ({category!r} has an item with key {extra[0]!r})"
            found_input = found_input or "input" in item
    return (True, "") if found_input else (False, f"{NEED} (no item has `input`)")


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """One case per item, ``<category>-<n>`` in file order; a bad item becomes an error case."""
    ids = Ids()
    cases = [
        _case(doc, raw, (category, index), f"{category}-{index + 1}", category, ids)
        for category, items in doc.data.items()
        for index, raw in enumerate(items)
    ]
    return LoadedFile(doc.path, NAME, cases)


def _case(
    doc: Document, raw: dict[str, Any], key: PathKey, name: str, category: str, ids: Ids
) -> Case:
    line = doc.line(key)
    case_id = ids.derive(name, line)
    problems = Problems(doc, case_id)
    query = problems.string(raw, "input", key, "the prompt sent to the agent")
    expect: dict[str, Any] = {"answered": True}
    answer = raw.get("expected")
    if (isinstance(answer, str) and answer.strip()) or is_number(answer):
        expect["answer"] = answer
    elif answer is not None:
        problems.add(
            (*key, "expected"),
            f"{pretty((*key, 'expected'))}: expected the answer text, got {answer!r}",
        )
    tools = problems.str_list(raw, "expected_tools", key)
    if tools is not None:
        expect["tool_usage"] = tools
    behavior = problems.string(raw, "expected_behavior", key)
    if behavior is not None:
        expect["behavior"] = behavior
    expect["response_time"] = RESPONSE_TIME_BUDGET_S
    tags = problems.tags(raw, "tags", key)
    timeout = problems.number(raw, "timeout", key, 0)
    return build_case(
        doc,
        key,
        case_id,
        problems,
        NAME,
        query=str(query),
        description=shorten(str(query)),
        expect=expect,
        tags=tuple(dict.fromkeys([slugify(category), *tags])),
        timeout=timeout,
    )


DIALECT = Dialect(NAME, detect, load)
