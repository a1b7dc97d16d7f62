"""Plain callables and objects with ``ainvoke``/``invoke``/``run``; the catch-all adapter.

Callables take ``(query, context)`` or ``(query)``, sync or async; their results come in any shape
SPEC §5 accepts. Tried last: it takes whatever no framework adapter took.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pytest_agent_eval.adapters.base import Agent, StandIn, UnreadableResult, calling
from pytest_agent_eval.adapters.messages import from_messages, text_of, tool_call
from pytest_agent_eval.core.results import AgentResult, RunRecord

OUTPUT_KEYS = ("output", "response", "answer", "final_message")
_METHODS = ("ainvoke", "invoke", "run")


def normalise(result: Any, earlier: int = 0) -> RunRecord:
    """Read any accepted result shape (SPEC §5) into a :class:`RunRecord`.

    ``earlier``: of a chat message list, the first messages that were given to the call (read only
    into the transcript: see ``from_messages``).
    """
    if isinstance(result, RunRecord):
        return result
    if isinstance(result, str):
        return RunRecord(output=result)
    if isinstance(result, AgentResult):
        return RunRecord(
            output=result.output,
            tool_calls=[tool_call(c) for c in result.tool_calls],
            reasoning=result.reasoning,
            metadata=dict(result.metadata),
            usage=dict(result.usage),
        )
    if isinstance(result, dict):
        return _from_dict(result, earlier)
    messages = getattr(result, "messages", None)
    if isinstance(messages, list):
        return from_messages(messages, earlier)
    if result is None:
        return RunRecord()
    if hasattr(result, "content"):  # a single chat message
        return RunRecord(output=text_of(result.content))
    return RunRecord(output=str(result))


def _from_dict(result: dict[str, Any], earlier: int = 0) -> RunRecord:
    key = next((k for k in OUTPUT_KEYS if k in result), None)
    if key is None and not isinstance(result.get("messages"), list):
        raise UnreadableResult(
            "the agent returned a dict without an answer: "
            f"its keys are {sorted(map(str, result))}; put the answer under "
            f"{', '.join(map(repr, OUTPUT_KEYS))}, or return a chat state with "
            "'messages' (a list), a string or an AgentResult"
        )
    if key is None:
        record = from_messages(result["messages"], earlier)
    else:
        record = RunRecord(output=text_of(result.get(key)))
        calls = result.get("tools_called", result.get("tool_calls")) or []
        record.tool_calls = [tool_call(c) for c in calls]
    record.reasoning = result.get("reasoning", record.reasoning)
    record.metadata = dict(result.get("metadata") or {})
    usage = result.get("usage") or result.get("token_usage")
    if isinstance(
        usage, dict
    ):  # else what the messages carried (LangChain's usage_metadata), if anything
        record.usage = dict(usage)
    return record


class PlainAdapter:
    """Callables and objects with ``ainvoke``/``invoke``/``run``.

    Of those methods, the first one it has is called.
    """

    name = "plain"

    def recognises(self, obj: Any) -> bool:
        return callable(obj) or (
            not inspect.isclass(obj) and any(callable(getattr(obj, m, None)) for m in _METHODS)
        )

    def agent(self, obj: Any, name: str) -> Agent:
        if not inspect.isclass(obj):
            for method in _METHODS:
                bound = getattr(obj, method, None)
                if callable(bound):
                    return calling(bound, f"{name}.{method}", self, obj)
        return calling(obj, name, self, obj)

    def normalise(self, result: Any) -> RunRecord:
        return normalise(result)

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        """A plain function (sync or async) becomes a stand-in recorded under its ``__name__``."""
        if not callable(tool):
            return None
        return standin(tool, str(getattr(tool, "__name__", type(tool).__name__)))

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        """A plain callable's tools are out of reach: its author wraps them (tool_mocks.wrap)."""
        return None


ADAPTER = PlainAdapter()
