"""The support agent with LangGraph (a ReAct agent)."""

from __future__ import annotations

import os
import warnings

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

from examples.frameworks import tools

MODEL = ChatOpenAI(
    model=os.environ.get("FRAMEWORKS_LLM_MODEL", "scripted"),
    base_url=os.environ["FRAMEWORKS_LLM_URL"],
    api_key=os.environ.get("FRAMEWORKS_LLM_KEY", "-"),
    max_retries=0,
)
with (
    warnings.catch_warnings()
):  # LangGraph 1.x points to langchain.agents.create_agent (another package)
    warnings.simplefilter("ignore", DeprecationWarning)
    AGENT = create_react_agent(MODEL, [tool(tools.lookup_order), tool(tools.search_kb)])
