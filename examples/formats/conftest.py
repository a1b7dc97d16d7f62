"""The JSON formats name no agent: this directory's eval files run the demo agent through the
``agent`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from examples.formats.agent import run


@pytest.fixture(scope="session")
def agent() -> Callable[..., Any]:
    return run
