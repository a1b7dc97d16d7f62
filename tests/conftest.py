"""Shared helpers: a scripted agent module that pytester runs write into their temporary folder."""

from __future__ import annotations

import contextlib
import importlib
import shutil
import sys
import types
from collections.abc import Iterator
from typing import Any

import _pytest.pytester
import jsonschema  # noqa: F401
import pytest

# - PyYAML, whose C loader cannot be imported twice (the plugin imports it lazily)
import yaml  # noqa: F401
from agent_sources import SCRIPTED_AGENT
from shared_run import OTHER_PLUGINS_OFF

# The plugin imports its runner and jsonschema lazily (start-up time). Imported here once, so that
# pytester's in-process runs find them loaded instead of importing them anew for every run.
import pytest_agent_eval.plugin.execute
import pytest_agent_eval.traffic.session  # noqa: F401

# httpx (and httpx2) with the httpcore of their transports, which they import only when a client is
# made: an httpcore loaded by an in-process run, then unloaded, would be loaded anew by the next,
# whose connection errors the httpx loaded here would no longer map to its own (an HTTP agent's or
# an LLM client's refused connection). The run store's SQLAlchemy and Alembic (every run is saved
# at its end, SPEC §24): loaded once here, not by each run.
with contextlib.suppress(ImportError):
    importlib.import_module("pytest_agent_eval.memory.store")
    importlib.import_module("alembic.runtime.environment")
    importlib.import_module("alembic.script")
    importlib.import_module("alembic.config")
    importlib.import_module("sqlalchemy.dialects.sqlite")

for _name in ("httpx", "httpx2"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_name).Client().close()


def _restore_without_stale_submodules(restore: Any) -> Any:
    """pytester's ``sys.modules`` restore, then this package's stale submodule attributes dropped.

    After an in-process run pytester takes out of ``sys.modules`` every module the run imported,
    but a package loaded before keeps those submodules as attributes. The plugin loads most of its
    modules lazily, so the next run's ``from pytest_agent_eval.report import formats`` would get
    the stale copy while ``from pytest_agent_eval.report.formats import withdraw`` imports a new
    one: two copies of one module, two stash keys (a refused resume then wrote its report, under
    ``-n`` after a run that stopped at a usage error).
    """

    def restored(snapshot: Any) -> None:
        restore(snapshot)
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith("pytest_agent_eval"):
                continue
            for attr, value in list(vars(module).items()):
                full = f"{name}.{attr}"
                stale = isinstance(value, types.ModuleType) and value.__name__ == full
                if stale and sys.modules.get(full) is not value:
                    delattr(module, attr)

    return restored


@pytest.fixture
def pytester(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[pytest.Pytester]:
    """pytester, whose runs load no slow-to-import plugin of other packages that no test here needs.

    That holds for its runs in-process, in a subprocess, and their pytest-xdist workers (see
    `OTHER_PLUGINS_OFF`).

    What pytester recorded of the test's in-process runs goes with the test: a module first imported
    inside a run (a lazily imported part of a package that has a pytest plugin, e.g. langsmith's)
    keeps that run's config alive through its loader after pytester took it out of sys.modules, and
    with it the recorded hook calls: a failed case's traceback, the agent in it and that agent's
    tool stand-ins, which later tests' runs would count as live.
    """
    monkeypatch.setenv("PYTEST_ADDOPTS", OTHER_PLUGINS_OFF)
    snapshot = _pytest.pytester.SysModulesSnapshot
    monkeypatch.setattr(snapshot, "restore", _restore_without_stale_submodules(snapshot.restore))
    recorders: list[pytest.HookRecorder] = []
    make = pytester.make_hook_recorder

    def make_hook_recorder(pluginmanager: pytest.PytestPluginManager) -> pytest.HookRecorder:
        recorders.append(make(pluginmanager))
        return recorders[-1]

    monkeypatch.setattr(pytester, "make_hook_recorder", make_hook_recorder)
    yield pytester
    for recorder in recorders:
        recorder.calls.clear()


@pytest.fixture
def evals(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory holding `scripted.py` (the agent above), which eval files can import."""
    pytester.makepyfile(scripted=SCRIPTED_AGENT)
    pytester.syspathinsert()
    return pytester


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest prints whole short-summary lines when CI or BUILD_NUMBER is set (as on a CI machine).

    The runs a test starts read the same there as on a developer's machine.
    """
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    for name in (
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_WORKSPACE",
    ):  # no annotations unless asked for
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private PostgreSQL server on a loopback port for the session (tests/postgres_support.py).

    Skipped, saying why, where the server cannot be installed.
    """
    import postgres_support

    why = postgres_support.unavailable()
    if why is not None:
        pytest.skip(why)
    pytest.importorskip(
        "psycopg", reason="the PostgreSQL store's tests need the [postgres] extra (psycopg 3)"
    )
    with postgres_support.postgres_server() as url:
        yield url


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (no download); else a skip saying why."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine: apt-get install chromium (CI installs it)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the dev extra installs playwright"
    )
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        yield launched
        launched.close()
