"""Tool-routing case lists (SPEC §12): ``[{name, prompt, expected_tools}]``.

Each expected tool must be called at least once (other calls are fine). Tools answer with the canned
responses of the ini option ``agent_eval_tool_responses`` (a ``{tool: response}`` JSON file); a tool
without one answers ``"Mock response for <name>"`` (``unmocked_tools: default``), as in the original
runner.
"""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Ids, Problems, build_case, item_keys, pretty
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, PathKey

NAME = "tool_routing"
ITEM_KEYS = ("name", "prompt", "expected_tools")
NEED = "a list of {name, prompt, expected_tools}"


def detect(data: Any) -> tuple[bool, str]:
    """A list of mappings that use ``prompt`` (and not ``input``)."""
    keys, why = item_keys(data, NEED)
    if why:
        return False, why
    if "prompt" not in keys:
        return False, f"{NEED} (items have no `prompt`)"
    if "input" in keys:
        return False, f"{NEED} (items use `input`)"
    return True, ""


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """One case per item, its id the slug of its name; a bad item becomes an error case."""
    ids = Ids()
    return LoadedFile(
        doc.path,
        NAME,
        [_case(doc, raw, (index,), index, ids) for index, raw in enumerate(doc.data)],
    )


def _case(doc: Document, raw: dict[str, Any], key: PathKey, index: int, ids: Ids) -> Case:
    line = doc.line(key)
    name = raw.get("name")
    named = name if isinstance(name, str) and name.strip() else None
    case_id = ids.derive(named or f"case-{index + 1}", line)
    problems = Problems(doc, case_id)
    if not named:
        problems.add(key, f"{pretty(key)}: missing `name` (a short label for the case)")
    problems.unknown_keys(raw, ITEM_KEYS, key, "case")
    prompt = problems.string(raw, "prompt", key, "the user message sent to the agent")
    tools = problems.str_list(raw, "expected_tools", key)
    problems.require(raw, "expected_tools", key, "the tools the agent should call")
    return build_case(
        doc,
        key,
        case_id,
        problems,
        NAME,
        query=str(prompt),
        description=name if name != case_id else None,
        expect={"tools_called": tools or []},
        unmocked_tools="default",
    )


DIALECT = Dialect(NAME, detect, load)
