"""Conversations with the framework agents (SPEC §17), through `turns:` and `simulated_user:`.

A real OpenAI Agents SDK agent, pydantic-ai agent and LangGraph ReAct agent, each talking to the
loopback OpenAI-compatible server, run by the plugin through `turns:` and `simulated_user:`. Each
turn's request carries the conversation so far in the framework's own form (the SDK's input list,
pydantic-ai's `message_history`, LangGraph's `messages` state); the usage each framework reports is
summed over every turn with the traffic hook off; tool mocks keep the calls the framework reported
itself (an SDK handoff) beside the ones they recorded.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.openai_server import ANSWER_PREFIX, ChatServer

for framework in ("agents", "pydantic_ai", "langgraph.prebuilt", "langchain_openai"):
    pytest.importorskip(framework, reason="the dev extra installs the frameworks")

AGENTS = '''
import os
import warnings

from agents import Agent, OpenAIChatCompletionsModel, function_tool
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

URL = os.environ["LOOPBACK_URL"]


def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: in the warehouse"


def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refund {order_id}: done for real"


SDK_MODEL = OpenAIChatCompletionsModel(model="sdk", openai_client=AsyncOpenAI(base_url=URL, \
api_key="-", max_retries=0))
SDK = Agent(name="support", instructions="Answer about orders.", model=SDK_MODEL, \
tools=[function_tool(lookup_order)])
BILLING = Agent(name="billing", instructions="Refund orders.", model=SDK_MODEL, \
tools=[function_tool(refund_order)])
TRIAGE = Agent(
    name="triage", instructions="Look orders up; hand refunds to billing.", model=SDK_MODEL,
    tools=[function_tool(lookup_order)], handoffs=[BILLING],
)
PAI = PydanticAgent(
    OpenAIChatModel("pai", provider=OpenAIProvider(base_url=URL, api_key="-")),
    instructions="Answer questions about orders.", tools=[lookup_order],
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    GRAPH_MODEL = ChatOpenAI(model="graph", base_url=URL, api_key="-", max_retries=0)
    GRAPH = create_react_agent(GRAPH_MODEL, [tool(lookup_order)])
'''

MATRIX = """
agents:
  sdk: fw_agents:SDK
  pai: fw_agents:PAI
  graph: fw_agents:GRAPH
cases:
"""
FRAMEWORKS = ("sdk", "pai", "graph")
FIRST, SECOND = "Where is order 42?", "When does it arrive?"
FIRST_ANSWER = ANSWER_PREFIX + "order 42: in the warehouse"
USAGE = {"input": 10, "output": 5, "total": 15}  # what the loopback server reports for each request


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    match = re.search(r"order (\d+)", prompt)
    return ("lookup_order", {"order_id": match.group(1)}) if match else None


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _said(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The user's and the assistant's texts in a request, in order (no tool calls or results)."""
    return [
        (m["role"], _text(m.get("content")))
        for m in body.get("messages", [])
        if m.get("role") in ("user", "assistant") and _text(m.get("content"))
    ]


def _asked(server: ChatServer, model: str, message: str) -> list[list[tuple[str, str]]]:
    """What each request of ``model`` that ends with the user's ``message`` said before it."""
    return [
        _said(body)[:-1]
        for body in server.requests
        if body.get("model") == model
        and body["messages"][-1]["role"] == "user"
        and _said(body)[-1:] == [("user", message)]
    ]


def _tokens(requests: int) -> dict[str, int]:
    return {k: v * requests for k, v in USAGE.items()}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(fw_agents=AGENTS)
    pytester.syspathinsert()
    return pytester


def _run(
    pytester: pytest.Pytester, *args: str
) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "--agent-eval-report=r.json", *args)
    assert "INTERNALERROR" not in result.stdout.str(), result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    return result, {c["case_id"]: c for c in report["cases"]}


def test_turns_give_each_framework_the_conversation_so_far_and_sum_its_usage(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items 1 and 3: turn 2's request holds turn 1's message and answer; tokens of all requests."""
    project.makefile(
        ".yaml",
        eval_turns=MATRIX
        + f"""
  - id: remembers
    turns:
      - {{input: "{FIRST}", expect: {{tools_called: [lookup_order], contains: [warehouse]}}}}
      - {{input: "{SECOND}", expect: {{tools_not_called: [lookup_order]}}}}
""",
    )
    with ChatServer(route, max_requests=100) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result, cases = _run(project)
    result.assert_outcomes(passed=3)
    for model in FRAMEWORKS:
        assert _asked(server, model, SECOND) == [[("user", FIRST), ("assistant", FIRST_ANSWER)]], (
            model
        )
        case = cases[f"remembers[{model}]"]
        transcript = [m["content"] for m in case["transcript"]]
        assert transcript == [FIRST, FIRST_ANSWER, SECOND, "I can answer that without tools."]
        assert [c["name"] for c in case["tool_calls"]] == ["lookup_order"]  # turn 1's call, once
        requests = sum(body["model"] == model for body in server.requests)
        assert requests == 3, model  # turn 1: the tool call and the answer; turn 2: the answer
        assert case["tokens"] == _tokens(requests), model


class Player:
    """The loopback LLM as the simulated user and as the scorer; agents' requests routed as usual.

    As the user it asks about order 42 after its greeting, then signs off; as the scorer it finds
    every task done.
    """

    def __call__(self, body: dict[str, Any]) -> str | None:
        if body.get("model") != "judge":
            return None
        messages = body["messages"]
        if len(messages) == 1:  # the scorer
            tasks = re.findall(
                r"^\d+\. \[\w+\] (.*?) \(acceptance criteria:", messages[0]["content"], re.M
            )
            return json.dumps({"tone": 1, "tasks": [{"scored": t, "score": 1} for t in tasks]})
        mine = [
            m for m in messages[1:] if m["role"] == "assistant"
        ]  # the simulator's own messages, greeting first
        return FIRST if len(mine) == 1 else "Thanks. Bye now"


def test_a_simulated_user_talks_to_each_framework_with_the_history_and_its_usage_is_summed(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items 1 and 3: the agent's 2nd call holds the greeting and its answer; its calls' tokens."""
    project.makefile(
        ".yaml",
        eval_chat=MATRIX
        + """
  - id: chat
    simulated_user:
      persona: Ann
      greetings: [Hello]
      tasks: [{task: Ask where order 42 is, acceptance_criteria: the agent says where it is}]
      signoff: Bye now
      max_turns: 8
""",
    )
    with ChatServer(route, answer=Player(), max_requests=100) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "judge")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        result, cases = _run(project)
    result.assert_outcomes(passed=3)
    for model in FRAMEWORKS:
        assert _asked(server, model, FIRST) == [
            [("user", "Hello"), ("assistant", "I can answer that without tools.")]
        ]
        case = cases[f"chat[{model}]"]
        assert [m["content"] for m in case["transcript"]][-1] == "Thanks. Bye now"
        requests = sum(body["model"] == model for body in server.requests)
        assert requests == 3, model  # the greeting's answer; the question's tool call and answer
        assert case["tokens"] == _tokens(requests), model


def handoff_script(body: dict[str, Any]) -> dict[str, Any] | None:
    """After a user message asking for a refund: each tool offered here, once, in order; an answer.

    The SDK's triage agent looks the order up and hands off to billing, which refunds; then the
    usual answer.
    """
    messages = body.get("messages") or []
    last_user = max((n for n, m in enumerate(messages) if m.get("role") == "user"), default=0)
    if "refund" not in _text(messages[last_user].get("content") if messages else "").lower():
        return None
    offered = [t["function"]["name"] for t in body.get("tools") or []]
    called = [
        c["function"]["name"] for m in messages[last_user:] for c in m.get("tool_calls") or []
    ]
    for name in ("lookup_order", "transfer_to_billing", "refund_order"):
        if name in offered and name not in called:
            args = {} if name.startswith("transfer_to_") else {"order_id": "42"}
            call = {
                "id": f"call_{name}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
    return None


HANDED_OFF = '''
def to_billing(run):
    """The run record's metadata names the handoff and the agent that answered last."""
    meta = run.metadata
    return meta.get("handoffs") == ["billing"] and meta.get("last_agent") == "billing", \
f"metadata {meta}"
'''


def test_tool_mocks_keep_the_handoff_the_sdk_reported(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2: the mocks' calls and the SDK's handoff, in order, each once; the metadata kept."""
    project.makepyfile(handoff_checks=HANDED_OFF)
    expect = (
        "{tool_sequence: [lookup_order, transfer_to_billing, refund_order], custom: "
        "['handoff_checks:to_billing']}"
    )
    project.makefile(
        ".yaml",
        eval_refund=f"""
agent: fw_agents:TRIAGE
defaults:
  tool_mocks: {{lookup_order: "order 42: delivered", refund_order: "refund 42: done"}}
cases:
  - id: refund
    input: Please refund order 42
    expect: {expect}
  - id: refund_later
    turns: [Hello, Please refund order 42]
    expect: {expect}
""",
    )
    with ChatServer(route, answer=handoff_script, max_requests=100) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result, cases = _run(project)
    result.assert_outcomes(passed=2)
    for case_id in ("refund", "refund_later"):
        assert [(c["name"], c["args"], c["result"]) for c in cases[case_id]["tool_calls"]] == [
            ("lookup_order", {"order_id": "42"}, "order 42: delivered"),
            ("transfer_to_billing", {}, "handed off to billing"),
            ("refund_order", {"order_id": "42"}, "refund 42: done"),
        ], case_id


def test_the_report_keeps_the_handoff_metadata_the_sdk_reported(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON report's case metadata has the run's ``handoffs`` / ``last_agent`` beside its own.

    A conversation's metadata joins its turns'.
    """
    project.makefile(
        ".yaml",
        eval_refund="""
agent: fw_agents:TRIAGE
defaults:
  tool_mocks: {lookup_order: "order 42: delivered", refund_order: "refund 42: done"}
  metadata: {team: billing-desk}
cases:
  - id: refund
    input: Please refund order 42
  - id: refund_later
    turns: [Hello, Please refund order 42]
""",
    )
    with ChatServer(route, answer=handoff_script, max_requests=100) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result, cases = _run(project)
    result.assert_outcomes(passed=2)
    assert cases["refund"]["metadata"] == {
        "team": "billing-desk",
        "handoffs": ["billing"],
        "last_agent": "billing",
    }
    assert cases["refund_later"]["metadata"] == cases["refund"]["metadata"]


def test_a_raising_tool_mock_in_the_sdk_is_handed_to_the_model_as_a_raising_tool_is(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``{raise: …}`` mock of an Agents SDK function tool does what the real tool raising does.

    The SDK's ``failure_error_function`` answers the model with its message and the run goes on; the
    record keeps the error.
    """
    project.makefile(
        ".yaml",
        eval_refund="""
agent: fw_agents:TRIAGE
cases:
  - id: refund
    input: Please refund order 42
    tool_mocks:
      lookup_order: {raise: "RuntimeError: order system down"}
      refund_order: "refund 42: done"
    expect: {tool_sequence: [lookup_order, transfer_to_billing, refund_order], \
contains: ["refund 42: done"]}
""",
    )
    with ChatServer(route, answer=handoff_script, max_requests=100) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result, cases = _run(project)
    result.assert_outcomes(passed=1)
    lookup = cases["refund"]["tool_calls"][0]
    assert lookup["name"] == "lookup_order" and "order system down" in str(lookup["error"]), lookup
    told = [m for body in server.requests for m in body["messages"] if m.get("role") == "tool"]
    assert (
        told[0]["content"] == "An error occurred while running the tool. Please try again."
    )  # the SDK's default
