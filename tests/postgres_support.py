"""A private PostgreSQL server for the run store's tests, from Debian's ``postgresql`` binaries.

A cluster made with ``initdb`` in a temporary directory and started with ``pg_ctl`` on a free
loopback port (password logins only).

PostgreSQL refuses to run as root: as root (CI), the cluster belongs to the ``postgres`` system user
(``nobody`` where there is none) and its programs run through ``runuser``. Where no ``initdb`` is
found the tests that need the server are skipped, saying so (``.ci/run`` installs the package).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "agent_eval"
PASSWORD = "pg-secret-41"


def _bin() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).resolve().parent if which else None


def _owner() -> pwd.struct_passwd | None:
    """The system user the server runs as when this process is root; ``None`` when it is not."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError(
        "running as root with neither a postgres nor a nobody user: PostgreSQL refuses root"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def unavailable() -> str | None:
    """Why no server can be started here; ``None`` when one can."""
    if _bin() is None:
        return "PostgreSQL is not installed (no initdb; Debian: apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL refuses to run as root"
    return None


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields its URL.

    The URL is ``postgresql://agent_eval:PASSWORD@127.0.0.1:PORT/postgres``.
    """
    bindir = _bin()
    assert bindir is not None
    owner = _owner()
    prefix = ["runuser", "-u", owner.pw_name, "--"] if owner is not None else []
    home = Path(
        tempfile.mkdtemp(prefix="agent-eval-pg-")
    )  # not under pytest's root-only tmp: the owner reads it
    try:
        (home / "pw").write_text(PASSWORD + "\n")
        if owner is not None:
            for path in (home, home / "pw"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        data, port = home / "data", _free_port()
        run = {"check": True, "capture_output": True, "text": True, "timeout": 120}
        subprocess.run(
            [*prefix, str(bindir / "initdb"), "-D", str(data), "-U", USER,
             f"--pwfile={home / 'pw'}", "-A", "scram-sha-256", "-E", "UTF8", "--no-sync"],
            **run,  # type: ignore[call-overload]
        )  # fmt: skip
        options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-o", options,
             "-l", str(home / "log"), "-w", "-t", "60", "start"],
            **run,  # type: ignore[call-overload]
        )  # fmt: skip
        try:
            yield f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True, timeout=60, check=False,
            )  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)


def fresh_database(url: str, name: str) -> str:
    """A new, empty database on the server at ``url``; its URL."""
    import psycopg

    with psycopg.connect(url.replace("postgresql://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + f"/{name}"
