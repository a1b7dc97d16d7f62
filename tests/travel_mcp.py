"""The travel desk with its tools served over MCP, for the composition suite (SPEC §17, §28).

* Run as a script (``python travel_mcp.py http PORT``): a FastMCP server of the official SDK named
  ``travel``, over streamable HTTP on ``127.0.0.1:PORT``, whose tools are ``travel_desk``'s own
  ``search_flights`` and ``book_flight`` (text results, no structured content: the record holds
  the same text as a function tool's).
* ``arun``: an agent on the SDK's own ``ClientSession`` against the server at ``TRAVEL_MCP_URL``:
  the server's tools offered to the loopback LLM at ``TRAVEL_LLM_URL`` as model ``travel-mcp``,
  the conversation's history from ``context["history"]``, the usage the LLM reported. Its tool
  calls are told by the plugin's MCP patch (mocked or passed through), not by the agent.

The test copies this file into each run's directory beside ``travel_desk.py``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

MODEL = "travel-mcp"


async def arun(query: str, context: dict[str, Any]) -> dict[str, Any]:
    """The MCP agent: one session per call, a tool loop until the LLM answers."""
    from openai import AsyncOpenAI
    from travel_desk import INSTRUCTIONS

    url = os.environ.get("TRAVEL_LLM_URL", "http://127.0.0.1:9/v1")
    client = AsyncOpenAI(base_url=url, api_key="unused", max_retries=0)
    history = [{"role": m["role"], "content": m["content"]} for m in context.get("history") or []]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        *history,
        {"role": "user", "content": query},
    ]
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    async with (
        streamablehttp_client(os.environ["TRAVEL_MCP_URL"]) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.inputSchema,
                },
            }
            for tool in (await session.list_tools()).tools
        ]
        while True:
            completion = await client.chat.completions.create(
                model=MODEL, messages=messages, tools=tools
            )
            for key in usage:
                usage[key] += getattr(completion.usage, key)
            message = completion.choices[0].message
            if not message.tool_calls:
                return {"output": str(message.content), "usage": usage}
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                arguments = json.loads(call.function.arguments)
                result = await session.call_tool(call.function.name, arguments)
                text = "\n".join(b.text for b in result.content if b.type == "text")
                content = f"error: {text}" if result.isError else text
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})


def serve(port: int) -> None:
    """The ``travel`` MCP server over streamable HTTP on loopback."""
    import travel_desk
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("travel", host="127.0.0.1", port=port)
    for tool in (travel_desk.search_flights, travel_desk.book_flight):
        server.tool(structured_output=False)(tool)
    server.run("streamable-http")


if __name__ == "__main__":
    serve(int(sys.argv[2]))
