"""The support agent with pydantic-ai."""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from examples.frameworks import tools

PROVIDER = OpenAIProvider(
    base_url=os.environ["FRAMEWORKS_LLM_URL"], api_key=os.environ.get("FRAMEWORKS_LLM_KEY", "-")
)
AGENT = Agent(
    OpenAIChatModel(os.environ.get("FRAMEWORKS_LLM_MODEL", "scripted"), provider=PROVIDER),
    instructions="Answer customers' questions about orders and shipping. Use the tools.",
    tools=[tools.lookup_order, tools.search_kb],
)
