"""Shared helpers: a scripted agent module that pytester runs write into their temporary directory."""

from __future__ import annotations

import contextlib
import importlib

import jsonschema  # noqa: F401
import pytest
from agent_sources import SCRIPTED_AGENT
from shared_run import OTHER_PLUGINS_OFF

# The plugin imports its runner and jsonschema lazily (start-up time). Imported here once, so that pytester's
# in-process runs find them loaded instead of importing them anew for every run.
import pytest_agent_eval.plugin.execute
import pytest_agent_eval.traffic.session  # noqa: F401 - with PyYAML, whose C loader cannot be imported twice

# httpx (and httpx2) with the httpcore of their transports, which they import only when a client is made: an
# httpcore loaded by an in-process run, then unloaded, would be loaded anew by the next, whose connection errors
# the httpx loaded here would no longer map to its own (an HTTP agent's or an LLM client's refused connection).
for _name in ("httpx", "httpx2"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_name).Client().close()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, whose runs (in-process, in a subprocess, and their pytest-xdist workers) load no plugin of other
    packages that takes long to import and that no test here needs (see `OTHER_PLUGINS_OFF`)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", OTHER_PLUGINS_OFF)
    return pytester


@pytest.fixture
def evals(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory holding `scripted.py` (the agent above), importable by the eval files."""
    pytester.makepyfile(scripted=SCRIPTED_AGENT)
    pytester.syspathinsert()
    return pytester


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest prints whole short-summary lines when CI or BUILD_NUMBER is set (as on a CI machine): the runs a
    test starts read the same there as on a developer's machine."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
