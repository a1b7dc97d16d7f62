"""Fixtures the plugin provides.

``agent_eval_case``, ``agent_eval_llm``, ``agent_eval_neo4j`` and ``tool_mocks``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the engine loads with the first eval case that needs it
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.llm import LLM
    from pytest_agent_eval.mocks import ToolMocks


@pytest.fixture
def agent_eval_case(request: pytest.FixtureRequest) -> Case:
    """The case the current eval item runs (for an ``agent`` fixture that adapts to the case)."""
    from pytest_agent_eval.core.case import Case

    case = getattr(request.node, "case", None)
    if not isinstance(case, Case):
        raise pytest.UsageError(
            "agent_eval_case is only available to eval items (cases from YAML/JSON files)"
        )
    return case


@pytest.fixture(scope="session")
def agent_eval_llm() -> LLM | None:
    """``(messages, **options) -> str`` for LLM judges.

    Override it in conftest.py, or set AGENT_EVAL_LLM_MODEL.
    """
    from pytest_agent_eval.llm import default_llm

    return default_llm()


@pytest.fixture(scope="session")
def agent_eval_neo4j() -> Any:
    """A Neo4j driver for conversations' Cypher assertions and setups.

    ``None``: the official driver, connected from NEO4J_URI / NEO4J_USERNAME / NEO4J_PASSWORD (or
    NEO_*) when first needed. Override it in conftest.py.
    """
    return None


@pytest.fixture
def tool_mocks(request: pytest.FixtureRequest) -> Iterator[ToolMocks]:
    """Mock tool dispatch for the running case: ``patch``, ``patch_tool``, ``wrap``.

    ``calls`` lists what was called.

    Eval items apply the file's ``tool_dispatch:`` (or ini ``agent_eval_tool_dispatch``) themselves;
    patches are undone when the test ends.
    """
    from pytest_agent_eval.mocks import ToolMocks  # the mock machinery loads when first used
    from pytest_agent_eval.plugin.state import get_state

    mocks = ToolMocks(adapters=get_state(request.config).adapters)
    yield mocks
    mocks.undo()
