"""The framework examples talk to a scripted OpenAI-compatible server on a loopback port.

That keeps them offline and free; set FRAMEWORKS_LLM_URL (and FRAMEWORKS_LLM_KEY,
FRAMEWORKS_LLM_MODEL) to run them against a real endpoint. A framework that cannot be imported
here skips its variants with the reason (e.g. pydantic-ai on Python 3.10).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from examples.frameworks.scripted_llm import start

if not os.environ.get("FRAMEWORKS_LLM_URL"):
    os.environ["FRAMEWORKS_LLM_URL"] = start()

AGENTS = {
    "openai_agents": ("examples.frameworks.agents_openai", "openai-agents"),
    "pydantic_ai": ("examples.frameworks.agents_pydantic_ai", "pydantic-ai"),
    "langgraph": ("examples.frameworks.agents_langgraph", "langgraph"),
}
HERE = Path(__file__).parent


def _unavailable() -> dict[str, str]:
    missing = {}
    for name, (module, extra) in AGENTS.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing[name] = f"{exc}; pip install 'pytest-agent-evalset[{extra}]'"
    return missing


MISSING = _unavailable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent != HERE:
            continue
        for name, why in MISSING.items():
            if item.name.endswith(f"[{name}]"):
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"the {name} example cannot import its framework: {why}"
                    )
                )
