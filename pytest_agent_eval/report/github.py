"""GitHub Actions workflow commands for a run (SPEC §25): ``::error`` annotations of failed cases.

One ``::error`` annotation per failed or errored case, at the case's own file and line, escaped as
GitHub's toolkit escapes them (``actions/toolkit``, ``packages/core/src/command.ts``:
``escapeData`` and ``escapeProperty``). Plain Python, no pytest.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePath

from pytest_agent_eval.report.markdown_text import reason
from pytest_agent_eval.report.record import CaseRecord

ANNOTATED = ("failed", "error")
"""The outcomes that fail a run: each gets an annotation."""
_DETAIL_LINES = 5


def escape_data(text: str) -> str:
    """A command's message as the toolkit's ``escapeData`` writes it.

    ``%``, CR and LF percent-encoded.
    """
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command property's value as the toolkit's ``escapeProperty`` writes it.

    Escaped as data, and ``:`` and ``,`` too (they end a property).
    """
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, properties: dict[str, str], message: str) -> str:
    """A workflow command, ``::name key=value,key=value::message``, each part escaped.

    Empty properties are left out, as the toolkit leaves them.
    """
    props = ",".join(
        f"{key}={escape_property(value)}" for key, value in properties.items() if value
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def workspace_path(file: str, rootdir: Path, workspace: str | None) -> str:
    """``file`` (relative to ``rootdir``) relative to the GitHub workspace (``$GITHUB_WORKSPACE``).

    There GitHub finds it in the pull request's diff; relative to the rootdir when there is no
    workspace or the file is not in it.
    """
    if workspace:
        try:
            relative = (rootdir / file).resolve().relative_to(Path(workspace).resolve())
        except (ValueError, OSError):
            pass
        else:
            return relative.as_posix()
    return PurePath(file).as_posix()


def message(record: CaseRecord) -> str:
    """What the annotation says, line by line.

    The one-line reason, then each check that failed (a few) and the agent's error, line by line,
    where the reason does not already say them.
    """
    first = reason(record)
    failed = [c for c in record.checks if not c.passed]
    more = [f"{c.name}: {c.message}" if c.message else c.name for c in failed[:_DETAIL_LINES]]
    more += (record.error or "").strip().splitlines()[:_DETAIL_LINES]
    rest = [
        line for line in dict.fromkeys(more) if line.strip() and " ".join(line.split()) not in first
    ]
    return "\n".join([first, *rest])


def error_commands(
    records: Iterable[CaseRecord], rootdir: Path, workspace: str | None
) -> list[str]:
    """One ``::error`` per failed or errored case, at its file and line.

    By node id: once per case.
    """
    out = []
    seen: set[str] = set()
    for record in records:
        if record.outcome not in ANNOTATED or record.nodeid in seen:
            continue
        seen.add(record.nodeid)
        properties = {"file": workspace_path(record.file, rootdir, workspace)}
        if record.line > 0:
            properties["line"] = str(record.line)
        properties["title"] = record.nodeid.rpartition("::")[2] or record.case_id
        out.append(command("error", properties, message(record)))
    return out


def in_actions(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether this process runs in a GitHub Actions job.

    ``GITHUB_ACTIONS=true``, as the runner sets it.
    """
    return environ.get("GITHUB_ACTIONS", "").lower() == "true"
