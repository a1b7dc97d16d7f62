"""The `agent` fixture of the OpenAI example: the real agent with OPENAI_API_KEY, else a skip."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def agent() -> Callable[..., Any]:
    if not os.environ.get("OPENAI_API_KEY"):
        pytest.skip(
            "the OpenAI example runs a live LLM: set OPENAI_API_KEY (and OPENAI_BASE_URL for "
            "another OpenAI-compatible endpoint, OPENAI_MODEL for the model)"
        )
    pytest.importorskip(
        "openai", reason="the OpenAI example needs `pip install 'pytest-agent-evalset[openai]'`"
    )
    from examples.openai_agent.agent import run_agent

    return run_agent
