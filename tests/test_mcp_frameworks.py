"""Each framework's own MCP client is mocked per case by the one patch (SPEC §28).

Each goes through the ``mcp`` SDK's ``ClientSession.call_tool``, so the one patch mocks its MCP
tools per case: the OpenAI Agents SDK's ``MCPServerStdio``/``MCPServerStreamableHttp`` and
langchain-mcp-adapters' ``MultiServerMCPClient``, each against a real FastMCP server (stdio and
streamable HTTP on loopback) whose tools write a file when they really run, with the model on the
loopback LLM.

pydantic-ai's ``MCPToolset`` (on the FastMCP client 3.x, which works with ``mcp`` 1) is among them:
its calls reach ``ClientSession.call_tool`` through FastMCP.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("mcp")

import mcp.client.session  # noqa: F401 - loaded before the runs, as an agent's module loads it
from mcp_support import (
    LANGCHAIN_AGENT,
    PYDANTIC_AI_AGENT,
    SDK_AGENT,
    SERVER,
    http_server,
    loopback_llm,
    ran,
    server_command,
)
from openai_server import ChatServer

# - the engine, loaded once for pytester's in-process runs
import pytest_agent_eval.mocks.mcp  # noqa: F401

RUN = ("-p", "no:cacheprovider", "-p", "no:randomly")

CASES = """
agent: framework_agent:run_agent
cases:
  - id: mocked_literal
    input: What is the weather in Paris?
    tool_mocks:
      weather.get_forecast: "sunny in Paris"
    expect:
      contains: ["sunny in Paris"]
      tools_called: [get_forecast]
  - id: mocked_when
    input: Any alerts for north?
    tool_mocks:
      get_alerts:
        when: [{args: {region: north}, return: {region: north, alerts: [flood]}}]
    expect:
      contains: ["flood"]
  - id: strict
    input: What is the weather in Oslo?
    tool_mocks:
      weather.get_alerts: "calm"
  - id: passthrough
    input: What is the weather in Rome?
    unmocked_tools: passthrough
    expect:
      contains: ["real forecast for Rome: rain"]
"""

FRAMEWORKS = {
    "openai-agents": ("agents", SDK_AGENT),
    "langchain-mcp-adapters": ("langchain_mcp_adapters", LANGCHAIN_AGENT),
    "pydantic-ai": ("pydantic_ai.mcp", PYDANTIC_AI_AGENT),
}


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with loopback_llm(monkeypatch) as server:
        yield server


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_frameworks_mcp_tools_are_mocked_per_case(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    chat: ChatServer,
    framework: str,
    transport: str,
) -> None:
    module, source = FRAMEWORKS[framework]
    pytest.importorskip(module)
    pytester.makepyfile(mcp_server=SERVER, framework_agent=source)
    pytester.path.joinpath("eval_mcp.yaml").write_text(CASES)
    marker = pytester.path / "ran.txt"
    monkeypatch.setenv("MCP_RAN", str(marker))
    monkeypatch.setenv("MCP_COMMAND", " ".join(server_command(pytester.path / "mcp_server.py")))
    monkeypatch.delenv("MCP_URL", raising=False)
    if transport == "http":
        with http_server(pytester.path / "mcp_server.py", {"MCP_RAN": str(marker)}) as url:
            monkeypatch.setenv("MCP_URL", url)
            result = pytester.runpytest(*RUN)
    else:
        result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*unmocked tool call weather.get_forecast(city='Oslo') in case strict (eval_mcp.yaml:*)*"]
    )
    assert ran(marker) == ["get_forecast Rome"]  # only the passed-through call reached the server
