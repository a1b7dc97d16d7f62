"""LangChain / LangGraph tools mocked through `tool_mocks.wrap`, calls recorded.

The stand-ins keep what the LLM sees, and a LangGraph agent (StateGraph + ToolNode) run by the
plugin against a scripted chat model has its calls recorded.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, Tool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.mocks import MockPlan, UnmockedToolError, wrap


class ScriptedChatModel(BaseChatModel):
    """A chat model calling the tool that ``route(prompt)`` picks, then answering from results.

    It calls the tool only if it was bound.
    """

    route: Callable[[str], tuple[str, dict[str, Any]] | None]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
            reply = AIMessage(content="Here is what I found: " + " | ".join(results))
        else:
            prompt = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
            picked = self.route(prompt)
            bound = [t["function"]["name"] for t in kw.get("tools", [])]
            if picked is None or picked[0] not in bound:
                reply = AIMessage(content=f"no tool for that (tools: {bound})")
            else:
                reply = AIMessage(
                    content="", tool_calls=[{"name": picked[0], "args": picked[1], "id": "call_1"}]
                )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def search_docs(query: str, max_results: int = 3) -> str:
    """Search the product documentation."""
    raise RuntimeError("search_docs would call the documentation search service")


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    raise RuntimeError("get_weather would call the weather API")


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    if match := re.search(r"weather in (\w+)", prompt):
        return "get_weather", {"city": match.group(1)}
    if match := re.search(r"docs about (\w+)", prompt):
        return "search_docs", {"query": match.group(1)}
    return None


def build_graph(tools: list[BaseTool]) -> Any:
    """A ReAct-style LangGraph agent: model -> tools -> model ... until the model answers."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    model = ScriptedChatModel(route=route).bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


CONFTEST = """
import pytest
from test_mocks_langgraph import build_graph, get_weather, search_docs

@pytest.fixture
def agent(tool_mocks):
    return build_graph([tool_mocks.wrap(search_docs), tool_mocks.wrap(get_weather)])
"""

EVALS = """
tags: [langgraph]
cases:
  - id: weather
    input: What is the weather in Oslo?
    tool_mocks:
      get_weather: {when: [{args: {city: Oslo}, return: "-3 C and snowing"}]}
    expect:
      tool_sequence: [get_weather]
      tool_args: {get_weather: {city: Oslo}}
      contains: ["-3 C and snowing"]
  - id: docs
    input: Find the docs about refunds
    tool_mocks:
      search_docs: {sequence: ["Refunds take 5 days."]}
    expect:
      tools_exactly: [search_docs]
      tool_args: {search_docs: {query: refunds, max_results: 3}}
      contains: ["Refunds take 5 days."]
  - id: docs_wrong_expectation
    input: Find the docs about shipping
    tool_mocks:
      search_docs: "Shipping is free over 50 EUR."
    expect:
      tools_called: [get_weather]
  - id: docs_typo
    input: Find the docs about shipping
    tool_mocks:
      search_docs: "Shipping is free over 50 EUR."
      serch_docs: "typo"
"""


def test_a_langgraph_agent_with_wrapped_tools_runs_mocked_and_recorded(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.path.joinpath("eval_graph.yaml").write_text(EVALS)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.re_match_lines(
        [
            line if line.startswith(".*") else re.escape(line)
            for line in [
                "case docs_wrong_expectation failed: 1 of 1 checks failed (score 0.00)",
                "  ✗ tools_called: not called: get_weather (score 0.00)",
                "  calls:",
                "     1. search_docs(query='shipping', max_results=3) -> 'Shipping "
                "is free over 50 EUR.'",
                "eval_graph.yaml:20: docs_wrong_expectation",
                ".* Captured agent output call .*",
                "Here is what I found: Shipping is free over 50 EUR.",
                # a mock of a tool without a stand-in fails before the agent runs (its real tool
                # might run)
                "eval_graph.yaml:26: case docs_typo: tool_mocks has a response for 'serch_docs' "
                "but the agent has no "
                'mocked tool of that name (did you mean "search_docs"?); mocked tools: '
                "get_weather, search_docs; "
                "the agent was not called",
            ]
        ]
    )
    assert "would call" not in result.stdout.str()


def test_a_graphs_mocked_copy_goes_with_its_graph(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's copy with stand-ins of a function-scoped `agent` fixture's graph goes with it.

    It goes with that graph also when the graph outlives its test in a reference cycle (a failed
    case's traceback): a later file's case that mocks a tool nothing patches reads so, and names no
    leftover stand-in.
    """
    graphs = pytester.mkdir("graphs")
    graphs.joinpath("conftest.py").write_text(
        "import pytest\n"
        "from test_mocks_langgraph import build_graph, get_weather, search_docs\n\n"
        "@pytest.fixture\n"
        "def agent():\n"
        "    return build_graph([search_docs, get_weather])  # the plugin mocks the graph's "
        "tool node in a copy\n"
    )
    graphs.joinpath("eval_graph.yaml").write_text(
        "cases:\n"
        "  - {id: weather, input: What is the weather in Oslo?, tool_mocks: {get_weather: sunny}}\n"
        "  - {id: typo, input: What is the weather in Oslo?, tool_mocks: {get_wether: sunny}}\n"
    )
    shop = pytester.mkdir("shop")
    shop.joinpath("shop_agent.py").write_text("def run(query, context):\n    return 'refunded'\n")
    shop.joinpath("eval_shop.yaml").write_text(
        "agent: shop_agent:run\ncases:\n  - {id: refund, input: q, tool_mocks: {refund: ok}}\n"
    )
    path = [str(Path(__file__).parent), str(shop), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, path)))
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "graphs", "shop"
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["shop/eval_shop.yaml:3: case refund has tool_mocks for refund but no tool is patched*"]
    )
    result.stdout.no_fnmatch_line("*case refund*mocked tools*")


def test_the_suites_in_process_runs_leave_no_stand_ins_to_later_tests(
    pytester: pytest.Pytester,
) -> None:
    """This suite in one process, this file before test_mocks_forms.py (as `-n 2` may order them).

    What a pytester run recorded (a failed case's traceback, with the agent and its stand-ins) goes
    with its test (the `pytester` fixture of tests/conftest.py), so a later test's run does not
    count those stand-ins as live.
    """
    here = Path(__file__).parent
    result = pytester.runpytest_subprocess(
        f"{here / 'test_mocks_langgraph.py'}::test_a_langgraph_agent_with_wrapped_tools_runs_"
        "mocked_and_recorded",
        f"{here / 'test_mocks_forms.py'}::test_mocks_that_nothing_patches_fail_before_the_real_"
        "tool_runs",
        f"--rootdir={here.parent}",
        f"-c={here.parent / 'pyproject.toml'}",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=3)


# -- what the LLM sees of a wrapped tool, and how its calls are read
# ---------------------------------------------


def plan(mocks: dict[str, Any], unmocked: str = "strict") -> MockPlan:
    return MockPlan.for_case(
        Case(id="c", path=Path("eval_x.yaml"), line=1, tool_mocks=mocks), unmocked=unmocked
    )


def test_wrapped_tools_look_the_same_to_the_llm() -> None:
    def plain(city: str, days: int = 1) -> str:
        """Forecast for a city."""
        return "real"

    for original, standin in [
        (search_docs, wrap(search_docs)),
        (get_weather, wrap(get_weather)),
        (tool(plain), tool(wrap(plain))),
    ]:
        assert isinstance(standin, BaseTool) and standin is not original
        assert convert_to_openai_tool(standin) == convert_to_openai_tool(original)
        assert (standin.name, standin.description, standin.args) == (
            original.name,
            original.description,
            original.args,
        )
    mocked = wrap(search_docs)
    assert wrap(mocked) is mocked


def test_tool_calls_are_recorded_with_the_models_arguments_sync_and_async() -> None:
    docs = wrap(search_docs)
    call = {"name": "search_docs", "args": {"query": "refunds"}, "id": "c1", "type": "tool_call"}
    with plan({"search_docs": {"sequence": ["sync hit", "async hit"]}}).record() as rec:
        assert docs.invoke(call).content == "sync hit"
        assert asyncio.run(docs.ainvoke({"query": "returns", "max_results": 1})) == "async hit"
    assert [(c.name, c.args, c.result) for c in rec.calls] == [
        ("search_docs", {"query": "refunds", "max_results": 3}, "sync hit"),
        ("search_docs", {"query": "returns", "max_results": 1}, "async hit"),
    ]


def test_passthrough_runs_the_real_tool_once_and_single_input_tools_record_their_input() -> None:
    seen: list[str] = []
    echo = Tool(
        name="echo",
        func=lambda text: seen.append(text) or f"real {text}",
        description="Echo the input.",
    )
    mocked = wrap(echo)
    with plan({}, unmocked="passthrough").record() as rec:
        assert asyncio.run(mocked.ainvoke("hi")) == "real hi"
    assert seen == ["hi"]
    assert [(c.name, c.args, c.result) for c in rec.calls] == [
        ("echo", {"tool_input": "hi"}, "real hi")
    ]
    with plan({}).record() as rec, pytest.raises(UnmockedToolError):
        mocked.invoke("hi")
    assert seen == ["hi"] and "unmocked tool call echo(tool_input='hi')" in rec.violations[0]


def test_a_tool_mocks_timeout_error_raised_through_the_tool_node_is_the_agents_exception(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.path.joinpath("eval_graph.yaml").write_text(
        """
defaults:
  tool_mocks: {get_weather: {raise: "TimeoutError: weather API slow"}}
cases:
  - {id: no_timeout, input: What is the weather in Oslo?}
  - {id: with_timeout, input: What is the weather in Oslo?, timeout: 30}
"""
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    for case in ("no_timeout", "with_timeout"):
        result.stdout.fnmatch_lines(
            [
                f"case {case} failed: the agent failed, nothing was checked (score 0.00)",
                "  ✗ agent raised TimeoutError: weather API slow",
                # no traceback: none of its frames is the user's (LangGraph's and the plugin's only)
                "  calls:",
                "     1. get_weather(city='Oslo') raised TimeoutError: weather API slow",
            ]
        )
    result.stdout.no_fnmatch_line("*did not answer*")
    result.stdout.no_fnmatch_line("*NoneType*")


def test_the_adapter_mocks_a_graphs_tool_node_in_a_copy_and_leaves_the_graph_alone() -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    from pytest_agent_eval.adapters.langchain import ADAPTER

    inner = build_graph([get_weather, search_docs])
    outer = StateGraph(MessagesState)
    outer.add_node("agent", inner)  # the tool node sits in a subgraph
    outer.add_edge(START, "agent")
    for graph in (inner, outer.compile()):
        mocked = ADAPTER.mock_tools(graph, wrap)
        assert mocked is not None and mocked is not graph
        with plan({"get_weather": "sunny"}).record() as rec:
            state = asyncio.run(ADAPTER.agent(mocked, "g").call("weather in Oslo", {}))
        assert [(c.name, c.args, c.result) for c in rec.calls] == [
            ("get_weather", {"city": "Oslo"}, "sunny")
        ]
        assert ADAPTER.normalise(state).output == "Here is what I found: sunny"
        with pytest.raises(
            RuntimeError, match="would call the weather API"
        ):  # the graph itself: the real tool
            asyncio.run(graph.ainvoke({"messages": [HumanMessage("weather in Oslo")]}))
    assert (
        ADAPTER.mock_tools(ScriptedChatModel(route=route), wrap) is None
    )  # a runnable without a tool node
