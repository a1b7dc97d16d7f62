"""pydantic-ai: agents run with ``agent.run(query)``, their tool calls, usage and function tools.

An ``Agent`` is run with ``agent.run(query)`` (in a conversation, with ``message_history``: the
previous run's ``all_messages()``); the tool calls and their returns come from the run's new
messages (``ToolCallPart``, ``ToolReturnPart``), the usage from ``result.usage``; its function tools
are replaced by copies whose function is a stand-in with the same signature, so the model sees the
same name, description and JSON schema. pydantic-ai is imported only for an object that is already
one of its own.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from pytest_agent_eval import compat
from pytest_agent_eval.adapters.base import Agent, StandIn
from pytest_agent_eval.adapters.plain import normalise as read_plain
from pytest_agent_eval.adapters.recognise import of_class, pydantic_ai_agent
from pytest_agent_eval.core.results import RunRecord, ToolCall
from pytest_agent_eval.core.trial import CONVERSATION

EXTRA = "pip install 'pytest-agent-evalset[pydantic-ai]'"


def read_result(result: Any) -> RunRecord:
    """An ``AgentRunResult`` read: output, this run's tool calls, usage and message history.

    The tool calls come in order with their returns; the whole message history is the conversation
    the next message continues.
    """
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    for (
        message
    ) in result.new_messages():  # not the earlier messages it was given: their calls are counted
        for part in getattr(message, "parts", ()):
            kind = getattr(part, "part_kind", "")
            if kind == "tool-call":
                args = (
                    part.args_as_dict() if hasattr(part, "args_as_dict") else dict(part.args or {})
                )
                call = ToolCall(part.tool_name, args)
                calls.append(call)
                by_id[str(part.tool_call_id)] = call
            elif kind == "tool-return":
                found = by_id.get(str(part.tool_call_id))
                if found is not None:
                    found.result = part.content
            elif kind == "retry-prompt" and getattr(part, "tool_name", None):
                found = by_id.get(str(part.tool_call_id))
                if found is not None:
                    found.error = str(part.content)
    output = getattr(result, "output", None)
    record = RunRecord(
        output=output if isinstance(output, str) else ("" if output is None else str(output))
    )
    record.tool_calls = calls
    record.conversation = result.all_messages()
    usage = getattr(result, "usage", None)
    if callable(usage) and not hasattr(
        usage, "input_tokens"
    ):  # a method before pydantic-ai 2.x, a property since
        usage = usage()
    if usage is not None:
        record.usage = {
            "input_tokens": getattr(usage, "input_tokens", 0) or 0,
            "output_tokens": getattr(usage, "output_tokens", 0) or 0,
            "requests": getattr(usage, "requests", 0) or 0,
        }
        for key in ("cache_read_tokens", "cache_write_tokens"):  # part of input_tokens
            if getattr(usage, key, 0):
                record.usage[key] = getattr(usage, key)
    return record


class PydanticAIAdapter:
    """``pydantic_ai.Agent`` objects, run with ``await agent.run(...)``.

    Called as ``await agent.run(query, message_history=<the earlier messages>)``.
    """

    name = "pydantic_ai"

    def recognises(self, obj: Any) -> bool:
        return pydantic_ai_agent(obj)

    def agent(self, obj: Any, name: str) -> Agent:
        async def run_agent(query: str, context: dict[str, Any]) -> Any:
            return await obj.run(
                query, message_history=CONVERSATION.get()
            )  # the earlier messages, if any

        return Agent(run_agent, True, getattr(obj, "name", None) or name, self, obj)

    def normalise(self, result: Any) -> RunRecord:
        if callable(getattr(result, "all_messages", None)) and hasattr(result, "output"):
            return read_result(result)
        return read_plain(result)

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        """A copy of a pydantic-ai ``Tool`` whose function (and schema's function) is a stand-in."""
        if not of_class(tool, "pydantic_ai", "Tool"):
            return None
        schema = tool.function_schema
        takes_ctx = bool(getattr(schema, "takes_ctx", False))
        signature = inspect.signature(tool.function)

        def args_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            bound = signature.bind_partial(*args, **kwargs).arguments
            if takes_ctx:  # the RunContext pydantic-ai passes first is not the model's argument
                bound.pop(next(iter(signature.parameters)), None)
            return dict(bound)

        mocked = standin(tool.function, tool.name, args_of)
        clone = copy.copy(tool)
        clone.function = mocked
        clone.function_schema = dataclasses.replace(schema, function=mocked)
        return clone

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        """A copy of the agent whose function toolset holds ``wrap(tool)`` for each tool.

        ``None`` when this pydantic-ai keeps its tools elsewhere (then wrap them with
        ``tool_mocks.wrap``).
        """
        return compat.pydantic_ai_with_tools(obj, wrap)


ADAPTER = PydanticAIAdapter()
