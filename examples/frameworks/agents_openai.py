"""The support agent with the OpenAI Agents SDK."""

from __future__ import annotations

import os

from agents import Agent, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI

from examples.frameworks import tools

CLIENT = AsyncOpenAI(
    base_url=os.environ["FRAMEWORKS_LLM_URL"], api_key=os.environ.get("FRAMEWORKS_LLM_KEY", "-")
)
AGENT = Agent(
    name="support",
    instructions="Answer customers' questions about orders and shipping. Use the tools.",
    model=OpenAIChatCompletionsModel(
        model=os.environ.get("FRAMEWORKS_LLM_MODEL", "scripted"), openai_client=CLIENT
    ),
    tools=[function_tool(tools.lookup_order), function_tool(tools.search_kb)],
)
