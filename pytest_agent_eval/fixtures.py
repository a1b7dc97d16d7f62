"""Fixtures the plugin provides: ``agent_eval_case`` and ``agent_eval_llm``."""

from __future__ import annotations

import pytest

from pytest_agent_eval.cases.model import Case
from pytest_agent_eval.llm import LLM, default_llm


@pytest.fixture
def agent_eval_case(request: pytest.FixtureRequest) -> Case:
    """The case the current eval item runs (for an ``agent`` fixture that adapts to the case)."""
    case = getattr(request.node, "case", None)
    if not isinstance(case, Case):
        raise pytest.UsageError("agent_eval_case is only available to eval items (cases from YAML/JSON files)")
    return case


@pytest.fixture(scope="session")
def agent_eval_llm() -> LLM | None:
    """``(messages) -> str`` for LLM judges; override it in conftest.py, or set AGENT_EVAL_LLM_MODEL."""
    return default_llm()
