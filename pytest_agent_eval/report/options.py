"""The report options (SPEC §10) read into a typed object.

Also the report paths pytest may take for test paths.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

if TYPE_CHECKING:
    from pytest_agent_eval.report.record import CaseRecord


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Declare the report options (SPEC §10) in the plugin's ``group``.

    :meth:`ReportOptions.from_config` reads them.
    """
    group.addoption(
        "--agent-eval-report",
        dest="agent_eval_report",
        metavar="PATH",
        default=None,
        help="write the run's metadata and every case's record as JSON to PATH "
        "(schema: agent-eval schema --report)",
    )
    group.addoption(
        "--agent-eval-markdown",
        dest="agent_eval_markdown",
        metavar="PATH",
        default=None,
        help="append the summary, the failures and the baseline comparison as markdown to PATH "
        "(e.g. $GITHUB_STEP_SUMMARY)",
    )
    group.addoption(
        "--agent-eval-html",
        dest="agent_eval_html",
        metavar="PATH",
        default=None,
        help="write one self-contained HTML page of the run to PATH: "
        "summary, charts, every case, the baseline",
    )
    group.addoption(
        "--agent-eval-baseline",
        dest="agent_eval_baseline",
        metavar="PATH",
        default=None,
        help="compare this run with an earlier --agent-eval-report file: "
        "regressions, fixes, new, missing",
    )
    group.addoption(
        "--agent-eval-tolerance",
        dest="agent_eval_tolerance",
        metavar="X",
        type=float,
        default=0.05,
        help="a score drop larger than X against the baseline is a regression (default 0.05)",
    )
    group.addoption(
        "--agent-eval-significance",
        dest="agent_eval_significance",
        metavar="P",
        type=float,
        default=0.05,
        help="a repeated case's pass-rate drop is a regression when Fisher's exact test "
        "gives p < P, and the suite gate fails when McNemar's test does (default 0.05)",
    )
    group.addoption(
        "--agent-eval-k",
        dest="agent_eval_k",
        metavar="K",
        type=int,
        default=None,
        help="k of pass@k and pass^k of repeated cases (default: each case's trials)",
    )
    group.addoption(
        "--agent-eval-fail-on-regression",
        dest="agent_eval_fail_on_regression",
        action="store_true",
        default=False,
        help="a regression against the baseline fails the run",
    )
    group.addoption(
        "--agent-eval-gate",
        dest="agent_eval_gate",
        choices=["regressions", "suite"],
        default=None,
        help="regressions: the exit status depends on regressions against the baseline alone; "
        "suite: on the suite-level test alone "
        "(the pass rate dropped with McNemar p < --agent-eval-significance)",
    )
    for name, ini, what in (
        (
            "--agent-eval-min-pass-rate",
            "agent_eval_min_pass_rate",
            "share of decided cases that must pass (0..1)",
        ),
        (
            "--agent-eval-max-cost",
            "agent_eval_max_cost",
            "the run's total LLM cost may not exceed this "
            "(no case starts once the known spend reaches it)",
        ),
        (
            "--agent-eval-max-p95-latency",
            "agent_eval_max_p95_latency_s",
            "p95 agent latency in seconds may not exceed",
        ),
    ):
        group.addoption(
            name,
            dest=ini,
            metavar="X",
            type=float,
            default=None,
            help=f"fail the run: {what} (ini: {ini})",
        )
        parser.addini(ini, f"suite threshold: {what}", default="")


class ReportOptions(NamedTuple):
    """The report options (SPEC §10), read once from the config.

    The files to write, the baseline to compare with, the suite thresholds.
    """

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
                "--agent-eval-gate and --agent-eval-fail-on-regression "
                "need --agent-eval-baseline PATH"
            )
        return options


REPORT_PATH_OPTIONS = (
    "--agent-eval-baseline",
    "--agent-eval-report",
    "--agent-eval-markdown",
    "--agent-eval-html",
)
"""The report options that take a path.

Pytest may take their value for a test path: ``rootdir_moved_by``.
"""


def rootdir_moved_by(config: pytest.Config) -> list[tuple[str, str]]:
    """``(option, value)`` of the report paths pytest took for test paths when it chose a rootdir.

    The report options given as two arguments (``--agent-eval-baseline /x/base.json``) whose
    existing path, outside the invocation directory, pytest took for a test path when it chose the
    rootdir: it reads a plugin's options only after. The rootdir then moved there (and the ini file
    beside the tests was not read); with ``=`` it would not have.
    """
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

BASELINE_LOADER = pytest.StashKey[Callable[[], "list[CaseRecord]"]]()
"""Set by a feature that reads the baseline from elsewhere than a report file.

For example ``store:BRANCH`` (SPEC §24): the loader returns the baseline's records, or raises
``BaselineError`` saying why it cannot be used.
"""

FLAKY = pytest.StashKey[dict[str, list[str]]]()
"""The run's flaky cases, set by the run store before the reports are written (SPEC §24).

Node id -> outcomes over the last runs (oldest first, this run's last); absent without a store.
"""
