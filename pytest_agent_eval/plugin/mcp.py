"""MCP tools mocked per case (SPEC §28): the pytest glue.

* The patch at the ``mcp`` SDK's ``ClientSession`` (``mocks/mcp.py``) is installed only once an MCP client is in
  use: at ``pytest_configure`` if ``mcp.client.session`` is loaded, else by an import hook when the agent's code
  imports it. Until then nothing of ``mcp`` nor of the engine is imported (SPEC §27).
* Stand-in servers (``mcp_servers:`` in the ini's ``agent_eval_mcp_servers`` file): see :class:`StandIns`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Sequence

import pytest

SESSION_MODULE = "mcp.client.session"


def _install(module: types.ModuleType) -> None:
    from pytest_agent_eval.mocks import mcp as mcp_tools

    mcp_tools.install(module)


class _Loader(importlib.abc.Loader):
    """Loads ``mcp.client.session`` with its own loader, then patches it."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        with _LOCK:
            if _USERS[0]:
                _install(module)


class _ImportHook(importlib.abc.MetaPathFinder):
    """Patches ``mcp.client.session`` when it is imported (one name compared per import until then)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != SESSION_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(spec.loader)
            return spec
        return None


_LOCK = threading.RLock()
_USERS = [0]
"""How many configured pytest sessions of this process watch for MCP (``pytester`` nests them)."""
_HOOK = _ImportHook()


def watch() -> None:
    """Patch ``ClientSession`` now if the ``mcp`` SDK is loaded, else when it is. Undone by :func:`unwatch`."""
    with _LOCK:
        _USERS[0] += 1
        module = sys.modules.get(SESSION_MODULE)
        if module is not None:
            _install(module)
        elif _HOOK not in sys.meta_path:
            sys.meta_path.insert(0, _HOOK)


def unwatch() -> None:
    """Undo one :func:`watch`; the last one restores ``ClientSession`` and removes the import hook."""
    with _LOCK:
        _USERS[0] = max(0, _USERS[0] - 1)
        if _USERS[0]:
            return
        if _HOOK in sys.meta_path:
            sys.meta_path.remove(_HOOK)
        engine = sys.modules.get("pytest_agent_eval.mocks.mcp")
        if engine is not None:
            engine.uninstall()


def pytest_configure(config: pytest.Config) -> None:
    watch()
    config.add_cleanup(unwatch)
