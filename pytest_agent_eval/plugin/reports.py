"""The reports as a feature: their options, their configuration, the built-in formats (SPEC §10).

The formats themselves (JSON, junit properties, markdown, HTML, the baseline gate) are plugin
objects of ``report/``, registered by ``report.formats`` on the controller only; this module is
their pytest entry.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.plugin.options import option_group
from pytest_agent_eval.plugin.state import STATE
from pytest_agent_eval.report import options


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(option_group(parser), parser)


def pytest_configure(config: pytest.Config) -> None:
    if compat.is_worker(
        config
    ):  # the reports are the controller's: an xdist worker loads none of them
        return
    from pytest_agent_eval.report import formats

    case_lines: Callable[[str], dict[str, int]] = partial(_case_lines, config)
    config.stash[formats.CASE_LINES] = case_lines
    formats.configure(config)


@pytest.hookimpl(tryfirst=True)
def pytest_agent_eval_register_formats(config: pytest.Config) -> None:
    from pytest_agent_eval.report import formats

    formats.builtin_formats(config)


def _case_lines(config: pytest.Config, file: str) -> dict[str, int]:
    """The line of each case id of the eval file ``file`` (relative to the rootdir).

    For the reports; empty when it cannot be read (a line is then not told, never made up).
    """
    from pytest_agent_eval.cases.load import load_file

    state = config.stash[STATE]
    try:
        loaded = load_file(
            config.rootpath / file, state.checks, state.dialects, cache=state.parse_cache
        )
    except (
        Exception
    ):  # an unreadable file, an error of a dialect plugin: the report is written all the same
        return {}
    return {case.id: case.line for case in loaded.cases}
