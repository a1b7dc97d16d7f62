"""One pytest run shared by several tests: many small scenarios in one directory, run once.

The scenarios are eval files with distinct names in one directory, run once in a Python process of
its own; each test then reads its own scenario's lines and outcomes.

The run's directory is made like a pytester directory (no ini file above it, no user configuration,
no colours, no outer ``PYTEST_ADDOPTS`` but `OTHER_PLUGINS_OFF`), and the run is a ``python -m
pytest`` process started there, as ``pytester.runpytest_subprocess`` starts it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

OTHER_PLUGINS_OFF = "-p no:hypothesispytest -p no:langsmith_plugin -p no:anyio"
"""The runs that tests start leave out the pytest plugins of hypothesis, langsmith and anyio
(installed with the dev dependencies, not needed by any eval run): the first two take about half a
second each to import, anyio a tenth, in every run in a subprocess and in every pytest-xdist worker.
"""

# `-rA` summary lines: "PASSED eval_a.yaml::case", "FAILED eval_a.yaml::case - reason", "ERROR
# eval_a.yaml::@file - …"
_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)(?: - .*)?$")
_HEADING = re.compile(r"^_{3,} .+ _{3,}$")
_PLURAL = {
    "PASSED": "passed",
    "FAILED": "failed",
    "ERROR": "errors",
    "XFAIL": "xfailed",
    "XPASS": "xpassed",
}


class SharedRun:
    """What one pytest run printed: the whole output, and per eval file its items' outcomes."""

    def __init__(self, path: Path, ret: int, stdout: str, stderr: str) -> None:
        self.path, self.ret, self.stdout, self.stderr = path, ret, stdout, stderr
        self.lines = stdout.splitlines()

    def __repr__(self) -> str:  # what an assertion about the run shows
        return f"<SharedRun ret={self.ret}>\n{self.stdout}\n{self.stderr}"

    @property
    def matcher(self) -> pytest.LineMatcher:
        """The run's standard output for ``fnmatch_lines`` and friends (as ``RunResult.stdout``)."""
        return pytest.LineMatcher(self.lines)

    def summary(self) -> list[tuple[str, str]]:
        """The ``-rA`` short-summary lines as (word, node id), in the order printed."""
        found = [_SUMMARY.match(line) for line in self.lines]
        return [(m[1], m[2]) for m in found if m]

    def outcomes(self, *files: str) -> dict[str, int]:
        """As ``RunResult.parseoutcomes()``, counted over the items of the given files only.

        Counted by the ``-rA`` lines; outcomes with no item are left out.
        """
        counts = Counter(
            _PLURAL[word] for word, nodeid in self.summary() if nodeid.split("::")[0] in files
        )
        return dict(counts)

    def assert_outcomes(self, files: tuple[str, ...], **expected: int) -> None:
        """As ``RunResult.assert_outcomes(...)`` for these files' items; outcomes not named: 0."""
        assert self.outcomes(*files) == {k: v for k, v in expected.items() if v}, (
            f"{files}: {self!r}"
        )

    def section(self, file: str) -> str:
        """The failure and error sections that name a line of ``file`` (``file:LINE``).

        A section runs from a ``____ title ____`` heading up to the next heading.
        """
        located = re.compile(rf"^{re.escape(file)}:\d")
        sections: list[list[str]] = []
        current: list[str] | None = None
        for line in self.lines:
            if _HEADING.match(line):
                current = [line]
                sections.append(current)
            elif line.startswith("====="):
                current = None
            elif current is not None:
                current.append(line)
        return "\n".join("\n".join(s) for s in sections if any(located.match(line) for line in s))

    def text_of(self, *files: str) -> str:
        """All the run printed about these files: failure and error sections, and lines naming one.

        The other lines are those naming one of them anywhere (progress, short summary).
        """
        named = [line for line in self.lines if any(file in line for file in files)]
        return "\n".join([*(self.section(file) for file in files), *named])

    def shows(self, *messages: str) -> None:
        """Each message is printed on a line of its own (literal text, no glob, blanks aside)."""
        printed = {line.strip() for line in self.lines}
        for message in messages:
            assert message in printed, f"{message!r} not printed:\n{self.stdout}"


def clean_env(path: Path, **extra: str) -> dict[str, str]:
    """A run's environment in ``path``, as pytester's: no outer options, CI, colours or home."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER", "TOX_ENV_DIR")}
    env.update(
        PYTEST_ADDOPTS=OTHER_PLUGINS_OFF,
        PY_COLORS="0",
        HOME=str(path),
        USERPROFILE=str(path),
        **extra,
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), os.environ.get("PYTHONPATH")]))
    return env


def run_pytest(path: Path, *args: str, timeout: float = 300, **env: str) -> SharedRun:
    """``python -m pytest ARGS`` in ``path`` (own basetemp, no cache), as runpytest_subprocess."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"--basetemp={path.parent / (path.name + '-basetemp')}",
            *args,
        ],
        cwd=path,
        env=clean_env(path, **env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )
    run = SharedRun(path, done.returncode, done.stdout, done.stderr)
    assert "INTERNALERROR" not in done.stdout + done.stderr, repr(run)
    return run


def write_files(path: Path, files: dict[str, str]) -> None:
    """Each file's text under its name (a name with its suffix, e.g. ``eval_a.yaml``)."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
