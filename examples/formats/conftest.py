"""The JSON formats name no agent: these eval files run the demo agent via the ``agent`` fixture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from examples.formats.agent import run


@pytest.fixture(scope="session")
def agent() -> Callable[..., Any]:
    return run
