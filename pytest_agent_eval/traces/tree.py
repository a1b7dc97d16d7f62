"""A trial's spans as the record keeps them (SPEC §23): plain dicts in a list, in start order.

Each span is ``{name, kind, attributes, status, start, duration_ms, parent}``, ``parent`` the index
of the parent span in the same list (``None`` at the top).

Plain data: no OpenTelemetry import here, so that checks and reports read a record's spans without
the SDK.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_agent_eval.traces import conventions as cv

Span = dict[str, Any]


def path_to(spans: list[Span], index: int) -> str:
    """The tree path of span ``index``: the names from the top down, ``a > b > c``."""
    names: list[str] = []
    seen: set[int] = set()
    at: int | None = index
    while at is not None and at not in seen and 0 <= at < len(spans):
        seen.add(at)
        names.append(str(spans[at].get("name")))
        parent = spans[at].get("parent")
        at = parent if isinstance(parent, int) else None
    return " > ".join(reversed(names))


def ancestors(spans: list[Span], index: int) -> list[int]:
    """The indexes of the spans above ``index``, nearest first."""
    out: list[int] = []
    parent = spans[index].get("parent")
    while isinstance(parent, int) and parent not in out and 0 <= parent < len(spans):
        out.append(parent)
        parent = spans[parent].get("parent")
    return out


def is_ours(span: Span) -> bool:
    """Made by the plugin (the trial's root, its chat and tool spans), not by the agent."""
    return (span.get("attributes") or {}).get(cv.ORIGIN) == cv.SERVICE


def is_llm_call(span: Span) -> bool:
    """Whether the span is a model call, in GenAI's or OpenInference's attributes.

    GenAI ``gen_ai.operation.name`` chat/text_completion/generate_content, or OpenInference's
    ``LLM`` kind.
    """
    attributes = span.get("attributes") or {}
    return (
        attributes.get(cv.OPERATION_NAME) in cv.LLM_OPERATIONS
        or attributes.get(cv.OI_SPAN_KIND) in cv.OI_LLM_KINDS
    )


def is_tool_call(span: Span) -> bool:
    attributes = span.get("attributes") or {}
    return (
        attributes.get(cv.OPERATION_NAME) == cv.OP_EXECUTE_TOOL
        or attributes.get(cv.OI_SPAN_KIND) in cv.OI_TOOL_KINDS
    )


def tool_call_of(span: Span) -> tuple[str, dict[str, Any], Any, str | None] | None:
    """``(name, arguments, result, error)`` of a tool span (GenAI or OpenInference attributes).

    ``None`` for another span or one that does not name its tool.
    """
    if not is_tool_call(span):
        return None
    attributes = span.get("attributes") or {}
    name = attributes.get(cv.TOOL_NAME) or attributes.get(cv.OI_TOOL_NAME)
    if not isinstance(name, str) or not name:
        return None
    raw_args = attributes.get(cv.TOOL_CALL_ARGUMENTS, attributes.get(cv.OI_INPUT_VALUE))
    args = _decoded(raw_args)
    result = _decoded(attributes.get(cv.TOOL_CALL_RESULT, attributes.get(cv.OI_OUTPUT_VALUE)))
    error = None
    if span.get("status") == "error":
        error = str(
            attributes.get(cv.ERROR_TYPE) or span.get("status_message") or "the tool raised"
        )
    return (
        name,
        args if isinstance(args, dict) else ({} if args is None else {"input": args}),
        result,
        error,
    )


def tool_server_of(span: Span) -> str | None:
    """The MCP server of a tool span (``mcp.server``, as this plugin writes it), else ``None``."""
    server = (span.get("attributes") or {}).get(cv.MCP_SERVER)
    return server if isinstance(server, str) and server else None


def _decoded(value: Any) -> Any:
    """A JSON text as its data; anything else as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
