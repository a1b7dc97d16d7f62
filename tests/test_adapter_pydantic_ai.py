"""A real pydantic-ai agent run by the plugin, its tools mocked by a copy of the agent.

The agent (``pydantic_ai.Agent`` with ``@agent.tool_plain`` tools, run by ``agent.run``) talks
through its OpenAI chat model to the loopback OpenAI-compatible server, run by the plugin from
``agent: module:AGENT``: the adapter copies the agent with stand-ins for its tools in cases with
``tool_mocks`` (the real tool never runs), leaves it as it is otherwise, and reads the calls from
the message history.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the dev extra installs pydantic-ai")

from tests.openai_server import ChatServer

AGENT = '''
import os
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

MODEL = OpenAIChatModel("loopback", provider=OpenAIProvider(base_url=os.environ["LOOPBACK_URL"], \
api_key="unused"))
AGENT = Agent(MODEL, instructions="Answer questions about orders.")


@AGENT.tool_plain
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    with Path(os.environ["REAL_TOOL_LOG"]).open("a") as log:  # what the real tool leaves behind
        log.write(order_id + "\\n")
    return f"order {order_id}: in the warehouse"
'''

CASES = """
agent: pai_agent:AGENT
cases:
  - id: mocked
    input: "Where is order 42?"
    tool_mocks: {lookup_order: "order 42: shipped"}
    expect: {contains: [shipped], tool_args: {lookup_order: {order_id: "42"}}}
  - id: wrong
    input: "Where is order 7?"
    tool_mocks: {lookup_order: "order 7: shipped"}
    expect: {tools_called: [refund_order]}
  - id: real
    input: "Where is order 9?"
    expect: {contains: [warehouse]}
"""


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    match = re.search(r"order (\d+)", prompt)
    return ("lookup_order", {"order_id": match.group(1)}) if match else None


@pytest.fixture
def graph_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The agent module and its cases; the real tool logs each order id it looks up.

    The log is ``real_tool.log``.
    """
    pytester.makepyfile(pai_agent=AGENT)
    pytester.makefile(".yaml", eval_orders=CASES)
    pytester.syspathinsert()
    monkeypatch.setenv("REAL_TOOL_LOG", str(pytester.path / "real_tool.log"))
    return pytester


def test_tool_mocks_replace_the_tools_of_a_pydantic_ai_agent(
    graph_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChatServer(route) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result = graph_project.runpytest(
            "-p", "no:cacheprovider", "--junitxml=junit.xml", "--agent-eval-report=r.json"
        )
    result.assert_outcomes(passed=2, failed=1)
    real = (graph_project.path / "real_tool.log").read_text().split()
    assert real == ["9"]  # only the case without tool_mocks ran the real tool
    result.stdout.fnmatch_lines(
        [
            "*case wrong failed*",
            "*✗ tools_called: not called: refund_order*",
            "*calls:",
            "*1. lookup_order(order_id='7') -> 'order 7: shipped'",
        ]
    )
    report = json.loads((graph_project.path / "r.json").read_text())
    recorded = {
        c["case_id"]: [(t["name"], t["args"], t["result"]) for t in c["tool_calls"]]
        for c in report["cases"]
    }
    assert recorded == {
        "mocked": [("lookup_order", {"order_id": "42"}, "order 42: shipped")],
        "wrong": [("lookup_order", {"order_id": "7"}, "order 7: shipped")],
        "real": [("lookup_order", {"order_id": "9"}, "order 9: in the warehouse")],
    }
    requested = [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for body in server.requests
        for message in body.get("messages", [])
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    ]
    assert sorted(map(json.dumps, requested)) == sorted(
        json.dumps((name, args)) for calls in recorded.values() for name, args, _ in calls
    )
    junit = ET.parse(graph_project.path / "junit.xml").getroot()
    tools = {
        case.get("name"): prop.get("value")
        for case in junit.iter("testcase")
        for prop in case.iter("property")
        if prop.get("name") == "tools_called"
    }
    assert tools == {"mocked": "lookup_order", "wrong": "lookup_order", "real": "lookup_order"}
