"""Real MCP servers for the tests, and an agent on the SDK's own ``ClientSession``.

A FastMCP server of the official SDK, run as a subprocess over stdio or over streamable HTTP on
loopback, whose tools write a file when they really run (a mocked call never does); and an agent
that uses the SDK's own ``ClientSession`` against the loopback LLM.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SERVER = '''
"""A real MCP server (FastMCP of the official SDK): its tools append a line to $MCP_RAN \
when they run."""
import os
import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("weather", host="127.0.0.1", port=int(sys.argv[2]) if len(sys.argv) > 2 else 8000)


def _ran(line: str) -> None:
    with open(os.environ["MCP_RAN"], "a", encoding="utf-8") as out:
        out.write(line + "\\n")


@server.tool()
def get_forecast(city: str) -> str:
    """The weather forecast for a city."""
    _ran(f"get_forecast {city}")
    return f"real forecast for {city}: rain"


@server.tool()
def get_alerts(region: str) -> dict:
    """Weather alerts for a region."""
    _ran(f"get_alerts {region}")
    return {"region": region, "alerts": ["real alert"]}


if __name__ == "__main__":
    server.run("streamable-http" if sys.argv[1:2] == ["http"] else "stdio")
'''

AGENT = '''
"""An agent on the mcp SDK's own ClientSession: the server's tools offered to the LLM, its \
calls sent to the
server (streamable HTTP at $AGENT_EVAL_MCP_WEATHER_URL or $MCP_URL; else stdio: the command in
$AGENT_EVAL_MCP_WEATHER_COMMAND or $MCP_COMMAND)."""
import contextlib
import json
import os
import shlex

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from openai import AsyncOpenAI


@contextlib.asynccontextmanager
async def connect():
    url = os.environ.get("AGENT_EVAL_MCP_WEATHER_URL") or os.environ.get("MCP_URL")
    if url:
        async with streamablehttp_client(url) as (read, write, _):
            async with ClientSession(read, write) as session:
                yield session
        return
    command, *args = shlex.split(os.environ.get("AGENT_EVAL_MCP_WEATHER_COMMAND") or \
os.environ["MCP_COMMAND"])
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            yield session


async def run_agent(query: str) -> str:
    client = AsyncOpenAI()
    async with connect() as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.inputSchema}}
            for t in listed.tools
        ]
        messages = [{"role": "user", "content": query}]
        for _ in range(4):
            reply = await client.chat.completions.create(model="loopback", \
messages=messages, tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = await session.call_tool(call.function.name, \
json.loads(call.function.arguments))
                text = "\\n".join(block.text for block in result.content if block.type == "text")
                if result.isError:
                    text = "tool error: " + text
                elif result.structuredContent is not None:
                    text += " structured=" + json.dumps(result.structuredContent, sort_keys=True)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return "gave up"
'''


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    """The scripted LLM: which MCP tool to call for a prompt."""
    if "alerts" in prompt:
        return "get_alerts", {"region": prompt.rsplit(" ", 1)[-1].strip("?")}
    if "weather" in prompt:
        return "get_forecast", {"city": prompt.rsplit(" ", 1)[-1].strip("?")}
    return None


@contextlib.contextmanager
def loopback_llm(monkeypatch: Any) -> Iterator[Any]:
    """The scripted loopback LLM (``route``), the OpenAI client pointed at it through the env."""
    from openai_server import ChatServer

    with ChatServer(route) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        yield server


def server_command(path: Path) -> list[str]:
    """The command that runs the server script at ``path`` over stdio."""
    return [sys.executable, str(path)]


START_S = 120
"""How long a server may take to listen (a loaded machine, two xdist workers importing at once)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(script: Path, env: dict[str, str]) -> Iterator[str]:
    """The server script over streamable HTTP on a free loopback port, for the block.

    Yields its ``/mcp`` URL. Its log goes to a file beside the script (a pipe nobody reads would
    stop it once full).
    """
    port = free_port()
    log = script.with_name(f"{script.stem}-{port}.log")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(script), "http", str(port)],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + START_S
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=0.5),
            ):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                said = log.read_text(errors="replace")
                raise RuntimeError(f"the MCP server did not listen within {START_S} s: {said}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ran(path: Path) -> list[str]:
    """The lines the server's tools wrote: the calls that really ran."""
    return path.read_text().splitlines() if path.exists() else []


SDK_AGENT = '''
"""An OpenAI Agents SDK agent with its tools from an MCP server (MCPServerStdio, or \
MCPServerStreamableHttp at
$MCP_URL) and its model on the loopback LLM."""
import os
import shlex

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from openai import AsyncOpenAI

set_tracing_disabled(True)


def server():
    if os.environ.get("MCP_URL"):
        return MCPServerStreamableHttp(params={"url": os.environ["MCP_URL"]}, name="wx")
    command, *args = shlex.split(os.environ["MCP_COMMAND"])
    return MCPServerStdio(params={"command": command, "args": args, \
"env": dict(os.environ)}, name="wx")


async def run_agent(query: str) -> str:
    async with server() as mcp_server:
        agent = Agent(
            name="forecaster",
            instructions="Answer weather questions with the tools.",
            model=OpenAIChatCompletionsModel(model="loopback", \
openai_client=AsyncOpenAI(max_retries=0)),
            mcp_servers=[mcp_server],
        )
        result = await Runner.run(agent, query)
        return str(result.final_output)
'''

LANGCHAIN_AGENT = '''
"""A LangChain agent with its tools from langchain-mcp-adapters' MultiServerMCPClient (stdio, or \
streamable HTTP
at $MCP_URL) and its model on the loopback LLM."""
import os
import shlex

from langchain.agents import create_agent
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI


def connections():
    if os.environ.get("MCP_URL"):
        return {"wx": {"transport": "streamable_http", "url": os.environ["MCP_URL"]}}
    command, *args = shlex.split(os.environ["MCP_COMMAND"])
    return {"wx": {"transport": "stdio", "command": command, "args": args, "env": dict(os.environ)}}


async def run_agent(query: str) -> str:
    tools = await MultiServerMCPClient(connections()).get_tools()
    agent = create_agent(ChatOpenAI(model="loopback", max_retries=0), tools)
    state = await agent.ainvoke({"messages": [{"role": "user", "content": query}]})
    return str(state["messages"][-1].content)
'''

PYDANTIC_AI_AGENT = '''
"""A pydantic-ai agent with its tools from an MCP server (MCPToolset, on the FastMCP client: stdio,
or streamable HTTP at $MCP_URL) and its model on the loopback LLM."""
import os
import shlex

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def toolset():
    if os.environ.get("MCP_URL"):
        return MCPToolset(os.environ["MCP_URL"])
    command, *args = shlex.split(os.environ["MCP_COMMAND"])
    return MCPToolset(StdioTransport(command=command, args=args, env=dict(os.environ)))


async def run_agent(query: str) -> str:
    provider = OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-loopback")
    agent = Agent(
        OpenAIChatModel("loopback", provider=provider),
        instructions="Answer weather questions with the tools.",
        toolsets=[toolset()],
    )
    async with agent:
        result = await agent.run(query)
    return str(result.output)
'''
