"""LangChain / LangGraph: runnables called with ``{"messages": [...]}`` state, and their tools.

A runnable (a compiled graph, a chain) is called with ``{"messages": [...]}`` state (in a
conversation, the previous call's messages and the new one); its ``messages`` state is read into the
run record (the usage from the AI messages' ``usage_metadata``). ``BaseTool`` objects (``@tool``,
``StructuredTool``, ``Tool``) are wrapped for tool mocks, and a graph's ``ToolNode`` tools
(``create_react_agent``) replaced by stand-ins. LangChain is imported only for an object that is
already one of its own.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.adapters.base import Agent, ArgsOf, StandIn
from pytest_agent_eval.adapters.messages import from_messages
from pytest_agent_eval.adapters.plain import normalise as read_plain
from pytest_agent_eval.adapters.recognise import runnable
from pytest_agent_eval.core.results import RunRecord
from pytest_agent_eval.core.trial import CONVERSATION

_FRAMEWORK_ARGS = frozenset(
    {"run_manager", "callbacks", "config"}
)  # what LangChain adds to a tool's own args


def is_tool(obj: Any) -> bool:
    """A LangChain ``BaseTool`` (without langchain loaded, nothing is one)."""
    tools = sys.modules.get("langchain_core.tools")
    return tools is not None and isinstance(obj, tools.BaseTool)


@dataclass(frozen=True)
class RunnableCall:
    """One call of a runnable: what it returned, and the messages it was given.

    Those messages (the conversation so far, then the user's message) are not its own.
    """

    result: Any
    given: list[Any]


class LangChainAdapter:
    """Runnables, which get the case's query as one user message after the conversation so far.

    The conversation so far is the previous call's ``messages``; their ``messages`` state is the
    run's transcript.
    """

    name = "langchain"

    def recognises(self, obj: Any) -> bool:
        return runnable(obj)

    def agent(self, obj: Any, name: str) -> Agent:
        async def run_graph(query: str, context: dict[str, Any]) -> Any:
            given = [*(CONVERSATION.get() or []), {"role": "user", "content": query}]
            return RunnableCall(
                await obj.ainvoke({"messages": given}, config=context.get("config")), given
            )

        return Agent(run_graph, True, name, self, obj)

    def normalise(self, result: Any) -> RunRecord:
        given: list[Any] = []
        if isinstance(result, RunnableCall):
            result, given = result.result, result.given
        if getattr(result, "tool_calls", None) and hasattr(
            result, "content"
        ):  # one AIMessage that calls tools
            record = from_messages([result])
        # a `messages` state (the messages it was given first), or what a chain's last step returned
        else:
            record = read_plain(result, len(given))
        messages = result.get("messages") if isinstance(result, dict) else None
        if isinstance(messages, list):
            record.conversation = messages
        else:  # a chain's answer: the conversation is what it was given and this answer
            answer = (
                result
                if hasattr(result, "content")
                else {"role": "assistant", "content": record.output}
            )
            record.conversation = [*given, answer]
        return record

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        """A copy of the tool whose ``_run``/``_arun`` are stand-ins.

        It keeps the same name, description and args schema.
        """
        if not is_tool(tool):
            return None
        from langchain_core.tools import BaseTool

        name = tool.name
        args_of = _tool_args(tool)
        clone = tool.model_copy()
        # an instance attribute shadows the method; pydantic's __setattr__ is bypassed
        object.__setattr__(clone, "_run", standin(tool._run, name, args_of))
        if (
            type(tool)._arun is not BaseTool._arun
        ):  # else BaseTool._arun runs _run (the stand-in) in a thread
            object.__setattr__(clone, "_arun", standin(tool._arun, name, args_of))
        return clone

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        """A copy of a LangGraph graph whose tool nodes hold ``wrap(tool)`` for each of their tools.

        The graph is a ``create_react_agent`` or a ``StateGraph`` with a ``ToolNode``; ``None`` for
        a runnable with no tool node.
        """
        return _with_wrapped_tools(obj, wrap, depth=3)


def _tool_args(tool: Any) -> ArgsOf:
    """Reads the arguments a LangChain tool's ``_run`` got.

    Those are the model's arguments, without injected ones.
    """
    try:
        schema = tool.tool_call_schema
        allowed = set(
            schema.get("properties", {}) if isinstance(schema, dict) else schema.model_fields
        )
        names = list(tool.args)
    except Exception:  # an exotic schema: record what the tool got
        allowed, names = set(), []
    names = names or ["tool_input"]

    def args_of(a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
        out = dict(zip(names, a, strict=False))  # a single-input Tool gets its input positionally
        out.update(
            (k, v)
            for k, v in kw.items()
            if k not in _FRAMEWORK_ARGS and (not allowed or k in allowed)
        )
        return out

    return args_of


def _with_wrapped_tools(graph: Any, wrap: Callable[[Any], Any], depth: int) -> Any:
    """``graph`` copied with every tool node holding stand-ins, or ``None``.

    Tool nodes in subgraphs count too, ``depth`` deep.
    """
    nodes = getattr(graph, "nodes", None)
    if depth <= 0 or not isinstance(nodes, dict) or not callable(getattr(graph, "copy", None)):
        return None
    changed = {}
    for name, node in nodes.items():
        bound = getattr(node, "bound", None)
        replaced = _tool_node(bound, wrap)
        if replaced is None and hasattr(bound, "nodes"):
            replaced = _with_wrapped_tools(bound, wrap, depth - 1)
        if replaced is not None:
            changed[name] = node.copy({"bound": replaced})
    return graph.copy({"nodes": {**nodes, **changed}}) if changed else None


def _tool_node(node: Any, wrap: Callable[[Any], Any]) -> Any:
    """A copy of a LangGraph ``ToolNode`` whose tools are stand-ins.

    ``None`` when ``node`` is not one.
    """
    tools = getattr(node, "_tools_by_name", None)
    if not isinstance(tools, dict) or not type(node).__module__.startswith("langgraph."):
        return None
    clone = copy.copy(node)
    clone._tools_by_name = {name: wrap(tool) for name, tool in tools.items()}
    for attr in (
        "func",
        "afunc",
    ):  # bound to the original node, they would read its tools: bind them to the copy
        method = getattr(node, attr, None)
        if method is not None and getattr(method, "__self__", None) is node:
            setattr(clone, attr, getattr(clone, method.__func__.__name__))
    return clone


ADAPTER = LangChainAdapter()
