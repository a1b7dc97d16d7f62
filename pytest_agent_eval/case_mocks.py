"""The tool mocks of one eval case: its dispatcher patched, its plan compiled, its trials recorded."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_agent_eval.cases.model import Case
from pytest_agent_eval.mocks import MockConfigError, MockPlan, Response, ToolMocks, load_responses
from pytest_agent_eval.runner import RecorderFactory
from pytest_agent_eval.state import get_state

_RESPONSES = pytest.StashKey["Mapping[str, Response] | MockConfigError"]()


def case_recorder(request: pytest.FixtureRequest, case: Case) -> RecorderFactory:
    """Patch the case's dispatcher and compile its mocks; the runner records each trial with the result.

    Call it after the agent and its fixtures are set up: it checks that every mocked tool is patched by then.
    Raises :class:`MockConfigError` with the file, line and what to do when the mocks cannot be used.
    """
    settings = get_state(request.config).settings
    dispatch = case.tool_dispatch or settings.tool_dispatch
    plan = MockPlan.for_case(case, session_responses(request.config), settings.unmocked_tools)
    if not dispatch and "tool_mocks" not in request.fixturenames:
        plan.require_patched()  # e.g. tools wrapped where the agent's module builds them
        return plan.recorder  # nothing to patch and no fixture to report calls to (and no fixture lookup to pay)
    mocks: ToolMocks = request.getfixturevalue("tool_mocks")
    if dispatch:
        source = "the file's `tool_dispatch:`" if case.tool_dispatch else "ini agent_eval_tool_dispatch"
        try:
            mocks.patch(dispatch)
        except MockConfigError as exc:
            raise MockConfigError(f"{case.location}: {source} {dispatch!r}: {exc}") from None
    plan.require_patched(dispatched=bool(dispatch))
    return mocks.recorder(plan)


def session_responses(config: pytest.Config) -> Mapping[str, Response]:
    """The ini ``agent_eval_tool_responses`` file, read once per session (a bad file fails every case)."""
    if _RESPONSES not in config.stash:
        path = get_state(config).settings.tool_responses
        try:
            config.stash[_RESPONSES] = load_responses(path) if path else {}
        except MockConfigError as exc:
            config.stash[_RESPONSES] = exc
    found = config.stash[_RESPONSES]
    if isinstance(found, MockConfigError):
        raise found
    return found
