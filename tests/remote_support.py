"""Remote pytest-xdist workers on loopback: execnet socket servers, one per worker.

The servers (``python -m execnet.script.socketserver``) each start in a working directory of their
own that holds a copy of the project, as a checkout on another machine would.

``--tx socket=127.0.0.1:PORT//chdir=DIR`` makes xdist connect to the server and run its worker there
(xdist rsyncs only pytest itself into DIR; the project is DIR's own). A server serves one worker at
a time: one server per worker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_READY = "Entering Accept loop"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    """One socket server: its process, port and working directory."""

    process: subprocess.Popen[str]
    port: int
    directory: Path
    output: list[str] = field(default_factory=list)

    @property
    def tx(self) -> str:
        return f"socket=127.0.0.1:{self.port}//chdir={self.directory}"

    def kill(self) -> None:
        """End the server process at once (SIGKILL): the machine is gone, with the worker it ran."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def _start(directory: Path, env: dict[str, str]) -> Server:
    """A server listening on a free port, working in ``directory`` (a few tries: the port may go).

    The free port may be taken before the server binds it.
    """
    for _ in range(5):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-u", "-m", "execnet.script.socketserver", f"127.0.0.1:{port}"],
            cwd=directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        server = Server(process, port, directory)
        ready = threading.Event()

        def read(server: Server = server, ready: threading.Event = ready) -> None:
            assert server.process.stdout is not None
            for line in server.process.stdout:
                server.output.append(line)
                if _READY in line:
                    ready.set()
            ready.set()  # the process ended

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 20
        while not ready.wait(0.05) and time.monotonic() < deadline:
            pass
        if process.poll() is None and ready.is_set():
            return server
        _stop(server)
    raise RuntimeError(f"no execnet socket server started in {directory}: {''.join(server.output)}")


def _stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=5)


@contextlib.contextmanager
def socket_servers(directories: list[Path], env: dict[str, str]) -> Iterator[list[Server]]:
    """One socket server per directory, killed when the block ends (whatever happened in it)."""
    servers: list[Server] = []
    try:
        for directory in directories:
            servers.append(_start(directory, env))
        yield servers
    finally:
        for server in servers:
            _stop(server)


def copy_project(source: Path, target: Path, leave_out: tuple[str, ...] = ()) -> Path:
    """A copy of the project ``source`` at ``target``, as a checkout on another machine.

    Its files, without the run's outputs and caches, nor the top-level names in ``leave_out``.
    """
    if target.exists():
        shutil.rmtree(target)
    ignored = shutil.ignore_patterns(
        "__pycache__", ".pytest_cache", "*.json", "workers", *leave_out
    )
    shutil.copytree(source, target, ignore=ignored)
    return target


def tx_args(servers: list[Server]) -> list[str]:
    """The controller's options for the servers' workers (``--dist load``: one spec per worker)."""
    return ["--dist", "load", *(arg for server in servers for arg in ("--tx", server.tx))]
