"""A call to an unmocked tool (``unmocked_tools: strict``) inside a framework agent (SPEC §17).

The stand-in raises inside the framework's machinery, and the failure text shows the line that
matters (the call, its arguments, the case's ``path:line`` and what to do) with the user's own
frames, not the framework's traceback; the JSON and HTML reports keep the call and that line.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the dev extra installs pydantic-ai")

from tests.openai_server import ChatServer

AGENT = '''
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

MODEL = OpenAIChatModel("loopback", provider=OpenAIProvider(base_url=os.environ["LOOPBACK_URL"], \
api_key="unused"))
AGENT = Agent(MODEL, instructions="Answer questions about orders.")


@AGENT.tool_plain
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    orders = {"7": "in the warehouse"}
    return f"order {order_id}: {orders[order_id]}"


@AGENT.tool_plain
def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refund {order_id}: done"
'''

CASES = """
agent: pai_agent:AGENT
cases:
  - id: refund
    input: "Please refund order 42"
    tool_mocks: {lookup_order: "order 42: delivered"}
    expect: {tools_called: [refund_order]}
  - id: lookup
    input: "Where is order 42?"
    expect: {contains: [warehouse]}
"""


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    match = re.search(r"order (\d+)", prompt)
    tool = "refund_order" if "refund" in prompt.lower() else "lookup_order"
    return (tool, {"order_id": match.group(1)}) if match else None


def test_an_unmocked_tool_inside_pydantic_ai_fails_with_the_line_that_matters(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(pai_agent=AGENT)
    pytester.makefile(".yaml", eval_orders=CASES)
    pytester.syspathinsert()
    with ChatServer(route) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result = pytester.runpytest(
            "-p", "no:cacheprovider", "--agent-eval-report=r.json", "--agent-eval-html=r.html"
        )
    result.assert_outcomes(failed=2)
    failure = result.stdout.str().split(" refund ___")[1].split("___ lookup ___")[0]
    where = "eval_orders.yaml:3"
    line = (
        f"unmocked tool call refund_order(order_id='42') in case refund ({where}): `tool_mocks` "
        "has no response for 'refund_order'"
    )
    assert line in failure
    assert "pydantic_ai" not in failure and "pydantic_graph" not in failure  # no framework frames
    assert len(failure.splitlines()) < 25, failure
    report = json.loads((pytester.path / "r.json").read_text())
    case = next(c for c in report["cases"] if c["case_id"] == "refund")
    assert [(c["name"], c["args"]) for c in case["tool_calls"]] == [
        ("refund_order", {"order_id": "42"})
    ]
    said = re.compile(
        r"unmocked tool call refund_order\(order_id='42'\) in case refund "
        r"\((\S*/)?eval_orders.yaml:3\)"
    )
    assert said.match(case["error"]), case["error"]
    assert said.search((pytester.path / "r.html").read_text())
    # an error in the user's own tool: its frame, the framework's folded into one line naming the
    # packages
    failure = result.stdout.str().split("___ lookup ___")[1].split("short test summary")[0]
    text = re.sub(r"File \"\S*/", 'File "', failure)
    assert re.search(
        r"""  ✗ agent raised KeyError: '42'
      Traceback \(most recent call last\):
        … \d+ frames in pydantic_ai, pydantic_graph\b.*
        File "pai_agent.py", line \d+, in lookup_order
          return f"order {order_id}: {orders\[order_id\]}"
.*
      KeyError: '42'
""",
        text,
    ), failure
