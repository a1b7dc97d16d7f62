"""MCP tools mocked per case (SPEC §28): the pytest glue.

* The patch at the ``mcp`` SDK's ``ClientSession`` (``mocks/mcp.py``) is installed only once an MCP
  client is in use: at ``pytest_configure`` if ``mcp.client.session`` is loaded, else by an import
  hook when the agent's code imports it. Until then nothing of ``mcp`` nor of the engine is imported
  (SPEC §27).
* Stand-in servers (``mcp_servers:`` in an eval file, or in the YAML file the ini
  ``agent_eval_mcp_servers`` names): :class:`StandIns` starts them (a stdio one is a command the
  agent's client runs; an HTTP one a process on a free loopback port) and tells the agent where they
  are: the ``agent_eval_mcp_servers`` fixture and the ``AGENT_EVAL_MCP_<NAME>_COMMAND`` / ``_URL``
  environment variables. A server that does not start is an infrastructure error of each case,
  naming its command.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    """Patches ``mcp.client.session`` when it is imported (until then, one compare per import)."""

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
    """Patch ``ClientSession`` now if the ``mcp`` SDK is loaded, else when it is.

    Undone by :func:`unwatch`.
    """
    with _LOCK:
        _USERS[0] += 1
        module = sys.modules.get(SESSION_MODULE)
        if module is not None:
            _install(module)
        elif _HOOK not in sys.meta_path:
            sys.meta_path.insert(0, _HOOK)


def unwatch() -> None:
    """Undo one :func:`watch`.

    The last one restores ``ClientSession`` and removes the import hook.
    """
    with _LOCK:
        _USERS[0] = max(0, _USERS[0] - 1)
        if _USERS[0]:
            return
        if _HOOK in sys.meta_path:
            sys.meta_path.remove(_HOOK)
        engine = sys.modules.get("pytest_agent_eval.mocks.mcp")
        if engine is not None:
            engine.uninstall()


_STANDINS = pytest.StashKey["StandIns"]()
_START_S = 30.0
"""How long an HTTP stand-in may take to listen."""


class StandIns:
    """The stand-in MCP servers of the run (this process).

    Declared by the ini's file and the eval files, started when collection ends, stopped at the
    session's end.
    """

    def __init__(self) -> None:
        self.declared: dict[str, Any] = {}
        """name -> ``StandinServer``, in declaration order."""
        self.addresses: dict[str, dict[str, Any]] = {}
        """name -> ``{"command": [...] | None, "url": str | None}``, for the fixture."""
        self.problems: list[str] = []
        """Why stand-ins cannot be had: each case errors with them (infrastructure)."""
        self._procs: list[subprocess.Popen[bytes]] = []
        self._dir: str | None = None
        self._env: dict[str, str | None] = {}

    def declare(self, servers: dict[str, Any]) -> None:
        for name, server in servers.items():
            known = self.declared.get(name)
            if known is None:
                self.declared[name] = server
            elif known.to_json() != server.to_json() or known.transport != server.transport:
                self.problems.append(
                    f"{server.where}: the stand-in MCP server {name!r} is declared differently at "
                    f"{known.where}; a run has one server of each name: rename one, or declare it "
                    "once (ini agent_eval_mcp_servers)"
                )

    def start(self) -> None:
        """Start what is declared and not started yet (a stdio stand-in is only a command)."""
        todo = [server for name, server in self.declared.items() if name not in self.addresses]
        if not todo:
            return
        from pytest_agent_eval.mocks import mcp as mcp_tools

        import_session()  # stand-ins declared: an MCP client is in use
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="agent-eval-mcp-")
        for server in todo:
            spec = Path(self._dir) / f"{server.name}.json"
            spec.write_text(json.dumps(server.to_json()), encoding="utf-8")
            command = [sys.executable, "-m", "pytest_agent_eval.mocks.mcp_standin", str(spec)]
            mcp_tools.TOOLS.note_standin(server.name, server.tools)
            if server.transport == "stdio":
                self.addresses[server.name] = {"command": command, "url": None}
                self._setenv(server.env_name("COMMAND"), shlex.join(command))
                continue
            url = self._serve_http(server, command)
            if url is not None:
                self.addresses[server.name] = {"command": None, "url": url}
                self._setenv(server.env_name("URL"), url)

    def _serve_http(self, server: Any, command: list[str]) -> str | None:
        """Start an HTTP stand-in on a free loopback port.

        Returns its URL, or ``None`` with the problem noted.
        """
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        command = [*command, "--http", str(port)]
        assert self._dir is not None
        log = Path(self._dir) / f"{server.name}.log"
        with log.open("wb") as out:
            try:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            except OSError as exc:
                self._failed(server, command, str(exc))
                return None
        self._procs.append(proc)
        deadline = time.monotonic() + _START_S
        while proc.poll() is None and time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=0.5),
            ):
                return f"http://127.0.0.1:{port}/mcp"
            time.sleep(0.05)
        said = log.read_text(errors="replace").strip().splitlines()[-5:]
        code = proc.poll()
        why = (
            f"it exited with code {code}"
            if code is not None
            else f"it did not listen within {_START_S:g} s"
        )
        self._failed(server, command, why + (": " + " | ".join(said) if said else ""))
        return None

    def _failed(self, server: Any, command: list[str], why: str) -> None:
        self.problems.append(
            f"{server.where}: the stand-in MCP server {server.name!r} did not start "
            f"({shlex.join(command)}): {why}"
        )

    def _setenv(self, name: str, value: str) -> None:
        self._env.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    def stop(self) -> None:
        engine = sys.modules.get("pytest_agent_eval.mocks.mcp")
        if engine is not None:
            engine.TOOLS.drop_standins(self.declared)
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        for name, value in self._env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._env.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.start()

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.problems and getattr(item, "case", None) is not None:
            from pytest_agent_eval.plugin.execute import InfrastructureError  # on a failure only

            raise InfrastructureError("\n".join(self.problems))


def import_session() -> None:
    """Load ``mcp.client.session`` (the patch installs with it)."""
    import importlib

    importlib.import_module(SESSION_MODULE)


def standins(config: pytest.Config) -> StandIns:
    """The run's stand-ins, registered as a plugin object with the first.

    The plugin object is named ``agent_eval_mcp_standins``.
    """
    found = config.stash.get(_STANDINS, None)
    if found is None:
        found = config.stash[_STANDINS] = StandIns()
        config.pluginmanager.register(found, "agent_eval_mcp_standins")
        config.add_cleanup(found.stop)
    return found


def declared(config: pytest.Config) -> dict[str, Any]:
    """The stand-in servers declared so far: name -> ``StandinServer`` (none: nothing is made)."""
    found = config.stash.get(_STANDINS, None)
    return dict(found.declared) if found is not None else {}


def declare(config: pytest.Config, servers: dict[str, Any]) -> None:
    """Stand-in servers an eval file declares (``mcp_servers:``); started when collection ends."""
    standins(config).declare(servers)


@pytest.fixture(scope="session")
def agent_eval_mcp_servers(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    """The run's stand-in MCP servers: name -> its command or URL.

    The value is ``{"command": [...] | None, "url": "http://127.0.0.1:…/mcp" | None}`` (a stdio
    stand-in has a command, an HTTP one a URL).
    """
    found = request.config.stash.get(_STANDINS, None)
    if found is None:
        return {}
    found.start()
    return {name: dict(address) for name, address in found.addresses.items()}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "agent_eval_mcp_servers",
        "a YAML file whose `mcp_servers:` declares stand-in MCP servers for the run (SPEC §28)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    watch()
    config.add_cleanup(unwatch)
    path = config.getini("agent_eval_mcp_servers")
    if path:
        _from_ini(
            config, (config.inipath.parent if config.inipath else config.rootpath) / str(path)
        )


def _from_ini(config: pytest.Config, path: Path) -> None:
    from pytest_agent_eval.core.errors import EvalFileError
    from pytest_agent_eval.mocks.mcp_standin import load_servers

    try:
        servers = load_servers(path)
    except (EvalFileError, OSError) as exc:
        raise pytest.UsageError(f"ini agent_eval_mcp_servers: {exc}") from None
    standins(config).declare(servers)
