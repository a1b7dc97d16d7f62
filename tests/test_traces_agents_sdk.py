"""The OpenAI Agents SDK's own tracing as a span source (SPEC §23, issue 40).

A project that turns the SDK's tracing into OpenTelemetry spans (here OpenInference's
``OpenAIAgentsInstrumentor``, a real instrumentation) gets the SDK's agent, generation and
function spans under each trial's root, where span checks read them; a project that did not set
up a processor of its own keeps the SDK's tracing off (its default exporter would send the spans
to OpenAI's servers).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("agents", reason="the dev extra installs openai-agents")
pytest.importorskip("opentelemetry.sdk")
pytest.importorskip(
    "openinference.instrumentation.openai_agents",
    reason="the dev extra installs openinference-instrumentation-openai-agents",
)

from tests.openai_server import ChatServer

AGENT = '''
import os

from agents import Agent, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

if os.environ.get("INSTRUMENT") == "1":
    OpenAIAgentsInstrumentor().instrument()  # the SDK's tracing, as OpenTelemetry spans


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: in the warehouse"


CLIENT = AsyncOpenAI(base_url=os.environ["LOOPBACK_URL"], api_key="unused", max_retries=0)
AGENT = Agent(
    name="support",
    instructions="Answer questions about orders.",
    model=OpenAIChatCompletionsModel(model="loopback", openai_client=CLIENT),
    tools=[lookup_order],
)
'''


def _suite(n: int) -> str:
    cases = "".join(
        f"""  - id: order{k}
    input: "Where is order {k}?"
    {"tool_mocks: {lookup_order: shipped}" if k % 2 else ""}
    expect:
      tool_args: {{lookup_order: {{order_id: "{k}"}}}}
      spans:
        - {{name: support, attributes: {{openinference.span.kind: AGENT}},
            within: {{name: "invoke_agent *"}}}}
        - {{name: lookup_order, attributes: {{openinference.span.kind: TOOL,
            input.value: {{regex: '"{k}"'}}}}, within: {{name: support}}, max_count: 1}}
"""
        for k in range(n)
    )
    return f"agent: sdk_agent:AGENT\ncases:\n{cases}"


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    match = re.search(r"order (\d+)", prompt)
    return ("lookup_order", {"order_id": match.group(1)}) if match else None


@pytest.fixture
def sdk_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(sdk_agent=AGENT)
    pytester.makefile(".yaml", eval_orders=_suite(4))
    pytester.syspathinsert()
    return pytester


@pytest.mark.parametrize(
    "how",
    [(), ("--agent-eval-concurrency", "4"), ("-n", "2")],
    ids=["serial", "concurrency", "xdist"],
)
def test_the_sdks_own_spans_are_under_each_trials_root_and_span_checks_read_them(
    sdk_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: tuple[str, ...]
) -> None:
    monkeypatch.setenv("INSTRUMENT", "1")
    with ChatServer(route) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        # a process of its own: the instrumentor stays registered with the SDK for the process
        result = sdk_project.runpytest_subprocess(
            "-p", "no:cacheprovider", *how, "--agent-eval-report=r.json"
        )
    result.assert_outcomes(passed=4)
    for case in json.loads((sdk_project.path / "r.json").read_text())["cases"]:
        spans = case["spans"]
        names = [s["name"] for s in spans]
        assert names[0] == "invoke_agent support", names
        tools = [s for s in spans if s["name"] == "lookup_order"]
        assert len(tools) == 1, names  # its own trial's call, not another case's
        order = case["case_id"].removeprefix("order")
        assert json.loads(tools[0]["attributes"]["input.value"]) == {"order_id": order}


def test_without_a_processor_of_the_projects_own_the_sdks_tracing_stays_off(
    sdk_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No span of the SDK reaches the record, and the span check says what it looked for."""
    monkeypatch.setenv("INSTRUMENT", "0")
    with ChatServer(route) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        result = sdk_project.runpytest("-p", "no:cacheprovider", "--agent-eval-report=r.json")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(["*spans*support*"])
    for case in json.loads((sdk_project.path / "r.json").read_text())["cases"]:
        assert "support" not in [s["name"] for s in case["spans"]]
