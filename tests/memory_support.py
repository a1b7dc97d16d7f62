"""Shared by the run store's tests (SPEC §24): an agent saying ``AGENT_SAYS``, runs at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAY_AGENT = """
import os

def run(query, context):
    return os.environ.get("AGENT_SAYS", "hello")
"""


def run_together(cwd: Path, *args: str, count: int = 2) -> list[tuple[int, str]]:
    """``count`` pytest processes with ``args`` started at once in ``cwd``: exit codes, outputs."""
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(count)
    ]
    outputs = [run.communicate(timeout=180)[0] for run in runs]
    return [(run.returncode, output) for run, output in zip(runs, outputs, strict=True)]
