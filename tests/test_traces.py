"""Traces in and out (SPEC §23, issue 40): every trial an OpenTelemetry trace (OTLP JSON lines, OTLP/HTTP), the
agent's own spans caught under its trial's root, span checks, tool checks from spans, a trace made a case."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import ChatServer
from test_traffic import RUN, point_at

pytest.importorskip("openai")
pytest.importorskip("opentelemetry.sdk")

AGENT = '''
import openai

MODEL = "loopback-model"


def dispatch_tool(name, args):
    return f"real {name}"


def agent(query):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": query}])
    try:
        found = dispatch_tool("lookup", {"city": query})
    except Exception as exc:
        found = f"lookup failed: {exc}"
    return reply.choices[0].message.content + " / " + str(found)
'''

SUITE = """
agent: tracing_agent:agent
tool_dispatch: tracing_agent:dispatch_tool
cases:
  - id: paris
    input: Paris
    tool_mocks: {lookup: "sunny in Paris"}
    expect: {contains: [sunny], tools_called: [lookup]}
  - id: oslo
    input: Oslo
    tool_mocks: {lookup: {raise: "TimeoutError: upstream"}}
    expect: {contains: [failed]}
"""


def _answer(body: dict[str, Any]) -> str:
    return "answer to " + str(body["messages"][-1]["content"])


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with ChatServer(lambda prompt: None, answer=_answer, max_requests=500) as server:
        point_at(monkeypatch, server.base_url)
        yield server


@pytest.fixture
def project(pytester: pytest.Pytester, chat: ChatServer) -> pytest.Pytester:
    pytester.makepyfile(tracing_agent=AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_trace=SUITE)
    return pytester


def read_traces(path: Path) -> list[dict[str, Any]]:
    """Every span of an OTLP JSON lines file, with its resource's attributes (``resource``)."""
    spans = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            found = {a["key"]: _value(a["value"]) for a in resource["resource"].get("attributes", [])}
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = {a["key"]: _value(a["value"]) for a in span.get("attributes", [])}
                    spans.append({**span, "resource": found})
    return spans


def _value(value: dict[str, Any]) -> Any:
    (kind, inner), = value.items()
    return int(inner) if kind == "intValue" else inner


def test_every_trial_is_one_trace_with_chat_and_tool_spans_and_the_checks_verdicts(project: pytest.Pytester) -> None:
    result = project.runpytest(*RUN, "--agent-eval-traces", "traces.jsonl", "--agent-eval-report", "report.json")
    result.assert_outcomes(passed=2)
    spans = read_traces(project.path / "traces.jsonl")
    roots = [s for s in spans if s["name"] == "invoke_agent tracing_agent:agent"]
    assert len(roots) == 2 and {r["attrs"]["agent_eval.case.id"] for r in roots} == {"paris", "oslo"}
    assert all(r["resource"]["service.name"] == "agent-eval" and r["resource"]["agent_eval.run.id"] for r in roots)
    for root in roots:
        children = {s["name"]: s for s in spans if s.get("parentSpanId") == root["spanId"]}
        assert set(children) == {"chat loopback-model", "execute_tool lookup"}, children
        assert all(c["traceId"] == root["traceId"] for c in children.values())
        chat = children["chat loopback-model"]["attrs"]
        assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.request.model"] == "loopback-model"
        assert chat["gen_ai.usage.input_tokens"] == 10 and chat["gen_ai.usage.output_tokens"] == 5
        assert "gen_ai.usage.cache_read.input_tokens" in chat and chat["gen_ai.response.id"]
        tool = children["execute_tool lookup"]
        assert tool["attrs"]["agent_eval.tool.mocked"] is True
        assert json.loads(tool["attrs"]["gen_ai.tool.call.arguments"]) == {"city": root["attrs"]["agent_eval.case.id"].title()}
        events = {e["attributes"][0]["value"]["stringValue"]: e for e in root.get("events", [])}
        assert all(e["name"] == "gen_ai.evaluation.result" for e in root["events"])
        if root["attrs"]["agent_eval.case.id"] == "paris":
            assert set(events) == {"contains", "tools_called"}
            assert tool["attrs"]["gen_ai.tool.call.result"] == "sunny in Paris"
            assert tool.get("status", {}).get("code", 0) != 2
        else:
            assert tool["status"]["code"] == 2  # ERROR: the mock raised
    cases = {c["case_id"]: c for c in json.loads((project.path / "report.json").read_text())["cases"]}
    by_trace = {r["attrs"]["agent_eval.case.id"]: r["traceId"] for r in roots}
    for case_id, case in cases.items():
        assert case["trace_id"] == by_trace[case_id] == case["trials"][0]["trace_id"]
        names = [s["name"] for s in case["spans"]]
        assert names[0] == "invoke_agent tracing_agent:agent" and "execute_tool lookup" in names
