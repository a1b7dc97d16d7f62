"""The report options (SPEC §10) read into a typed object, and the report paths pytest may take for test paths."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class ReportOptions:
    """The report options (SPEC §10): the files to write, the baseline to compare with, the suite thresholds."""

    json: Path | None = None
    markdown: Path | None = None
    html: Path | None = None
    baseline: Path | None = None
    tolerance: float = 0.05
    significance: float = 0.05
    fail_on_regression: bool = False
    gate: str | None = None
    min_pass_rate: float | None = None
    max_cost: float | None = None
    max_p95_latency_s: float | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> ReportOptions:
        def path(option: str) -> Path | None:
            value = config.getoption(option, None)
            return Path(value) if value else None

        def threshold(name: str) -> float | None:
            given = config.getoption(name, None)
            if given is not None:
                return float(given)
            text = str(config.getini(name)).strip()
            try:
                return float(text) if text else None
            except ValueError:
                raise pytest.UsageError(f"ini {name} = {text!r}: give a number") from None

        options = cls(
            json=path("agent_eval_report"),
            markdown=path("agent_eval_markdown"),
            html=path("agent_eval_html"),
            baseline=path("agent_eval_baseline"),
            tolerance=config.getoption("agent_eval_tolerance"),
            significance=config.getoption("agent_eval_significance"),
            fail_on_regression=bool(config.getoption("agent_eval_fail_on_regression")),
            gate=config.getoption("agent_eval_gate"),
            min_pass_rate=threshold("agent_eval_min_pass_rate"),
            max_cost=threshold("agent_eval_max_cost"),
            max_p95_latency_s=threshold("agent_eval_max_p95_latency_s"),
        )
        if options.baseline is None and (options.gate or options.fail_on_regression):
            raise pytest.UsageError(
                "--agent-eval-gate and --agent-eval-fail-on-regression need --agent-eval-baseline PATH"
            )
        return options


REPORT_PATH_OPTIONS = ("--agent-eval-baseline", "--agent-eval-report", "--agent-eval-markdown", "--agent-eval-html")


def rootdir_moved_by(config: pytest.Config) -> list[tuple[str, str]]:
    """``(option, value)`` of the report options given as two arguments (``--agent-eval-baseline /x/base.json``)
    whose existing path, outside the invocation directory, pytest took for a test path when it chose the rootdir:
    it reads a plugin's options only after. The rootdir then moved there (and the ini file beside the tests was
    not read); with ``=`` it would not have."""
    if config.inipath is not None and config.inipath.parent == config.rootpath:
        return []  # the rootdir is the ini file's
    here, root = config.invocation_params.dir.resolve(), config.rootpath.resolve()
    args = [str(a) for a in config.invocation_params.args]
    moved = []
    for flag, value in itertools.pairwise(args):
        if flag not in REPORT_PATH_OPTIONS:
            continue
        try:
            path = (here / value).resolve()
            outside = not path.is_relative_to(here) and path.is_relative_to(root)
            if outside and path.exists():
                moved.append((flag, value))
        except (OSError, ValueError):  # a name too long, a NUL: not a path pytest took either
            continue
    return moved


REPORT_OPTIONS = pytest.StashKey[ReportOptions]()
"""The run's report options, read once by ``formats.configure``."""
