"""What data files may read (SPEC §22), as pytest options.

``--agent-eval-allow-path DIR`` and the ini ``agent_eval_allow_paths`` (folders outside the rootdir
``file://`` references may read) and ``agent_eval_max_cases_per_file``; configure hands them to
:mod:`pytest_agent_eval.cases.trust`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

MAX_CASES_PER_FILE = 100_000
"""The default of ``agent_eval_max_cases_per_file`` (``cases.trust`` holds the same: its engine
loads at configure).
"""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agent-eval")
    group.addoption(
        "--agent-eval-allow-path",
        dest="agent_eval_allow_path",
        metavar="DIR",
        action="append",
        default=[],
        help="a folder outside the rootdir that eval files' `file://` references may read "
        "(repeatable; ini: agent_eval_allow_paths)",
    )
    parser.addini(
        "agent_eval_allow_paths",
        "folders outside the rootdir that `file://` references may read (relative to the rootdir)",
        type="paths",
        default=[],
    )
    parser.addini(
        "agent_eval_max_cases_per_file",
        f"most cases one eval file may expand to (default {MAX_CASES_PER_FILE})",
        default=str(MAX_CASES_PER_FILE),
    )


def pytest_configure(config: pytest.Config) -> None:
    from pytest_agent_eval.cases import trust

    text = str(config.getini("agent_eval_max_cases_per_file")).strip() or str(MAX_CASES_PER_FILE)
    try:
        bound = int(text)
    except ValueError:
        bound = 0
    if bound < 1:
        raise pytest.UsageError(
            f"ini agent_eval_max_cases_per_file = {text!r}: give a whole number of at least 1"
        )
    invocation = config.invocation_params.dir
    given = [invocation / d for d in config.getoption("agent_eval_allow_path") or []]
    for folder in given:
        if not folder.is_dir():
            raise pytest.UsageError(f"--agent-eval-allow-path {folder}: not a folder")
    ini: list[Path] = list(config.getini("agent_eval_allow_paths"))
    trust.configure([config.rootpath, *ini, *given], bound)


def pytest_unconfigure(config: pytest.Config) -> None:
    import sys

    trust = sys.modules.get("pytest_agent_eval.cases.trust")
    if trust is not None:
        trust.reset()
