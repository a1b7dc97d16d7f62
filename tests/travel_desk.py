"""One travel-desk agent built every way a user builds an agent, for the composition suite.

The agent has the tools ``search_flights`` and ``book_flight``; the suite is
``tests/test_composition.py`` (SPEC §17). Each talks to the loopback OpenAI-compatible server at
``TRAVEL_LLM_URL`` through its real client, as model ``travel-<kind>`` (the server tells the kinds
apart by it):

* ``run`` (sync), ``arun`` (async) and ``TravelDesk`` (a class: ``module:Class``): a tool loop on
  the official ``openai`` client; the history of a conversation from ``context["history"]``; tools
  through ``dispatch_tool`` (the eval files' ``tool_dispatch:``); they report their tool calls and
  the usage the server reported;
* ``SDK_CHAT``, ``SDK_RESPONSES``, ``SDK_HANDOFF``: OpenAI Agents SDK agents (chat completions
  model, Responses API model, and a triage agent that searches and hands booking off to a booking
  agent);
* ``PYDANTIC_AI``: a pydantic-ai agent; ``LG_REACT``: LangGraph's ``create_react_agent``;
  ``LG_GRAPH``: a LangGraph ``StateGraph`` built by hand (model node, ``ToolNode``); ``LC_AGENT``:
  ``langchain.agents.create_agent``;
* ``serve_chat``: the same tool loop behind an HTTP agent service (``POST {message, session_id}``),
  which keeps each session's conversation (run by the test, in its own process).

The framework agents are built at import; a framework that is not installed fails only the cases
that use it (its ``ImportError`` is raised when the attribute is read). The test copies this file
into each run's directory as ``travel_desk.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

INSTRUCTIONS = (
    "You are a travel desk. Find flights with search_flights and book them with book_flight."
)
BOOKING_INSTRUCTIONS = "You book flights with book_flight."


def search_flights(origin: str, destination: str) -> str:
    """Search the flights from one city to another; returns flight numbers with their prices."""
    return f"AZ310 {origin}-{destination} 07:40 EUR 95; AF100 {origin}-{destination} 09:00 EUR 120"


def book_flight(flight: str) -> str:
    """Book a flight by its flight number."""
    return f"Booked {flight}: confirmation K7Q2"


TOOLS = {"search_flights": search_flights, "book_flight": book_flight}


def dispatch_tool(name: str, args: dict[str, Any]) -> Any:
    """The plain agents' tool dispatcher (``tool_dispatch: travel_desk:dispatch_tool``)."""
    return TOOLS[name](**args)


def canned_search(origin: str, destination: str) -> str:
    """A ``{call: travel_desk:canned_search}`` tool mock."""
    return f"IB770 {origin}-{destination} EUR 65; AF100 {origin}-{destination} EUR 120"


SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": search_flights.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}},
                "required": ["origin", "destination"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": book_flight.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"flight": {"type": "string"}},
                "required": ["flight"],
            },
        },
    },
]


def _url() -> str:
    """The loopback server the test started (none outside a test: the discard port refuses)."""
    return os.environ.get("TRAVEL_LLM_URL", "http://127.0.0.1:9/v1")


def _messages(query: str, context: dict[str, Any]) -> list[dict[str, Any]]:
    history = [{"role": m["role"], "content": m["content"]} for m in context.get("history") or []]
    return [
        {"role": "system", "content": INSTRUCTIONS},
        *history,
        {"role": "user", "content": query},
    ]


class _Loop:
    """One tool loop's state: the messages, the calls made, the usage summed over the answers."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.calls: list[dict[str, Any]] = []
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def step(self, completion: Any) -> str | None:
        """Take one answer: run the tools it calls (``None``: ask again), or return its text."""
        for key in self.usage:
            self.usage[key] += getattr(completion.usage, key)
        message = completion.choices[0].message
        if not message.tool_calls:
            return str(message.content)
        self.messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            try:
                result: Any = dispatch_tool(call.function.name, args)
            except Exception as exc:  # the model is told, as frameworks tell it
                result = f"error: {exc}"
            self.calls.append({"name": call.function.name, "args": args, "result": result})
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
        return None

    def result(self, output: str) -> dict[str, Any]:
        return {"output": output, "tools_called": self.calls, "usage": self.usage}


def converse(messages: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """The sync tool loop over ``messages`` (changed in place: answers, tool results appended)."""
    from openai import OpenAI

    client = OpenAI(base_url=_url(), api_key="unused", max_retries=0)
    loop = _Loop(messages)
    while True:
        output = loop.step(
            client.chat.completions.create(model=model, messages=messages, tools=SCHEMAS)
        )
        if output is not None:
            messages.append({"role": "assistant", "content": output})
            return loop.result(output)


def run(query: str, context: dict[str, Any]) -> dict[str, Any]:
    """The plain sync agent."""
    return converse(_messages(query, context), "travel-sync")


async def arun(query: str, context: dict[str, Any]) -> dict[str, Any]:
    """The plain async agent (``AsyncOpenAI``)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=_url(), api_key="unused", max_retries=0)
    loop = _Loop(_messages(query, context))
    while True:
        completion = await client.chat.completions.create(
            model="travel-async", messages=loop.messages, tools=SCHEMAS
        )
        output = loop.step(completion)
        if output is not None:
            return loop.result(output)
        await asyncio.sleep(0)


class TravelDesk:
    """The plain agent as a class (``agent: travel_desk:TravelDesk``, made once per session)."""

    def __init__(self) -> None:
        self.model = "travel-class"

    def run(self, query: str, context: dict[str, Any]) -> dict[str, Any]:
        return converse(_messages(query, context), self.model)


def _tool_error(ctx: Any, error: Exception) -> str:
    return f"The tool failed: {error}"


def _sdk(kind: str) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, function_tool
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=_url(), api_key="unused", max_retries=0)
    model_class = OpenAIResponsesModel if kind == "sdk_responses" else OpenAIChatCompletionsModel
    model = model_class(model="travel-" + kind.replace("_", "-"), openai_client=client)
    # the model is told what the tool raised (the SDK's default tells it only that an error
    # occurred)
    search = function_tool(search_flights, failure_error_function=_tool_error)
    book = function_tool(book_flight, failure_error_function=_tool_error)
    if kind != "sdk_handoff":
        return Agent(
            name="travel_desk", instructions=INSTRUCTIONS, model=model, tools=[search, book]
        )
    booking = Agent(name="booking", instructions=BOOKING_INSTRUCTIONS, model=model, tools=[book])
    return Agent(
        name="triage", instructions=INSTRUCTIONS, model=model, tools=[search], handoffs=[booking]
    )


def _pydantic_ai() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(
        "travel-pydantic-ai", provider=OpenAIProvider(base_url=_url(), api_key="unused")
    )
    return Agent(model, instructions=INSTRUCTIONS, tools=[search_flights, book_flight])


def _chat_model(kind: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="travel-" + kind.replace("_", "-"), base_url=_url(), api_key="unused", max_retries=0
    )


def _lg_react() -> Any:
    import warnings

    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # LangGraph 1.x points to langchain.agents.create_agent
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(
            _chat_model("lg_react"), [tool(search_flights), tool(book_flight)]
        )


def _lg_graph() -> Any:
    """A LangGraph ``StateGraph`` built by hand: model node with tools bound, ``ToolNode``, a loop.

    The loop goes between them while the model calls tools.
    """
    from langchain_core.messages import SystemMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    tools = [tool(search_flights), tool(book_flight)]
    model = _chat_model("lg_graph").bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(INSTRUCTIONS), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def _lc_agent() -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    return create_agent(
        _chat_model("lc_agent"),
        [tool(search_flights), tool(book_flight)],
        system_prompt=INSTRUCTIONS,
    )


_BUILDERS = {
    "SDK_CHAT": lambda: _sdk("sdk_chat"),
    "SDK_RESPONSES": lambda: _sdk("sdk_responses"),
    "SDK_HANDOFF": lambda: _sdk("sdk_handoff"),
    "PYDANTIC_AI": _pydantic_ai,
    "LG_REACT": _lg_react,
    "LG_GRAPH": _lg_graph,
    "LC_AGENT": _lc_agent,
}
_MISSING: dict[str, ImportError] = {}
for _name, _build in _BUILDERS.items():  # built at import, as a user's module builds its agent
    try:
        globals()[_name] = _build()
    except ImportError as exc:  # that framework is not installed: only the cases that use it fail
        _MISSING[_name] = exc


def __getattr__(name: str) -> Any:
    """A framework agent whose framework is not installed: the ImportError that says so."""
    if name in _MISSING:
        raise _MISSING[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serve_chat(sessions: dict[str, list[dict[str, Any]]], body: dict[str, Any]) -> dict[str, Any]:
    """The HTTP agent service's answer to ``{message, session_id}``: the loop over the session."""
    messages = sessions.setdefault(
        str(body.get("session_id")), [{"role": "system", "content": INSTRUCTIONS}]
    )
    messages.append({"role": "user", "content": str(body.get("message"))})
    return converse(messages, "travel-http")
