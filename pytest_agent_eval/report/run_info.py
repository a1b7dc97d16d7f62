"""The ``run`` of a report and of a journal: when and how the run ran.

From its options and its checkout; light (stdlib and pytest), so the journal writes it without the
report machinery.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.secrets import scrub_text
from pytest_agent_eval.version import __version__

_SECRET = re.compile(r"(key|token|secret|password|passwd|auth|credential|cookie)", re.IGNORECASE)
_COMMIT = re.compile(r"[0-9a-f]{40,64}")
_NOT_FINISHED = (
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.INTERNAL_ERROR,
    pytest.ExitCode.USAGE_ERROR,
)


def redacted(args: list[str]) -> list[str]:
    """Command-line arguments with the values of secret-looking options replaced by ``***``.

    ``--api-key=x``, ``-o token=x``, ``--token x``.
    """
    out: list[str] = []
    hide_next = False
    for arg in map(
        scrub_text, args
    ):  # a URL's userinfo (redis://:password@host), a secret the run knows
        if hide_next:
            out.append("***")
            hide_next = False
        elif "=" in arg and _SECRET.search(arg.split("=", 1)[0]):
            out.append(arg.split("=", 1)[0] + "=***")
        else:
            out.append(arg)
            hide_next = arg.startswith("-") and bool(_SECRET.search(arg))
    return out


def git_commit(directory: Path) -> str | None:
    """HEAD of the git checkout ``directory`` is in, or ``None`` (not a checkout, or no git)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return commit_or_none(done.stdout.strip()) if done.returncode == 0 else None


def commit_or_none(text: str) -> str | None:
    """``text`` when it is a commit's full hash, else ``None``."""
    return text if _COMMIT.fullmatch(text) else None


def run_start(
    config: pytest.Config, started: datetime.datetime, commit: str | None
) -> dict[str, Any]:
    """The ``run`` as far as it is known when the run starts: no duration, end or exit status."""
    run = {
        "started": started.isoformat(timespec="seconds"),
        "plugin_version": __version__,
        "pytest_version": pytest.__version__,
        "python_version": platform.python_version(),
        "git_commit": commit,
        "args": redacted([str(a) for a in config.invocation_params.args]),
        "llm_model": os.environ.get("AGENT_EVAL_LLM_MODEL") or None,
    }
    trace_url = config.getoption("agent_eval_trace_url", None)
    if trace_url:  # --agent-eval-trace-url: the HTML report links each case's trace (SPEC §23)
        run["trace_url"] = trace_url
    for name, key in (("agent_eval_shard", "shard"), ("agent_eval_resume", "resumed_from")):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:  # --agent-eval-shard, --agent-eval-resume
            run[key] = plugin.to_dict()
    return run


def run_end(
    start: dict[str, Any], duration_s: float, exit_status: int | None, stopped: bool = False
) -> dict[str, Any]:
    """The report's ``run``: ``start`` (:func:`run_start`) with its duration and how it ended."""
    finished = exit_status is not None and exit_status not in _NOT_FINISHED and not stopped
    return {
        "started": start["started"],
        "duration_s": duration_s,
        "finished": finished,
        "exit_status": None if exit_status is None else int(exit_status),
        **{k: v for k, v in start.items() if k != "started"},
    }
