"""Shared helpers: a scripted agent module that pytester runs write into their temporary directory."""

from __future__ import annotations

import pytest
from agent_sources import SCRIPTED_AGENT


@pytest.fixture
def evals(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory holding `scripted.py` (the agent above), importable by the eval files."""
    pytester.makepyfile(scripted=SCRIPTED_AGENT)
    pytester.syspathinsert()
    return pytester
