"""Injection variants as pytest items (SPEC §26).

For ``--agent-eval-inject CORPUS`` and a case's ``inject:``.

Every case with ``inject:`` (and, under the option, every case with tool mocks) is followed by one
variant per payload, ``case[inject:<family>-<n>]``, marked ``injection`` (``-m injection`` selects
them, ``-m "not injection"`` leaves them out). The engine (``cases.injection``) loads with the first
file that has such a case.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pytest

from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case

MARKER = (
    "injection: a tool-output injection variant case[inject:<family>-<n>] (pytest-agent-eval, "
    "SPEC §26)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--agent-eval-inject",
        dest="agent_eval_inject",
        metavar="CORPUS",
        default=None,
        help="add injection variants of every case with tool mocks: one per payload of CORPUS "
        "(`builtin`, or a YAML file of payloads), the payload in every mocked tool's output",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def wanted(config: pytest.Config, cases: Iterable[Case]) -> bool:
    """Whether any of ``cases`` gets injection variants in this run."""
    return bool(config.getoption("agent_eval_inject", None)) or any(
        case.inject is not None for case in cases
    )


def expand(config: pytest.Config, cases: Iterable[Case]) -> Iterator[Case]:
    """Each case, followed by its injection variants."""
    from pytest_agent_eval.cases.injection import plan_of, variants

    option = config.getoption("agent_eval_inject", None)
    base = config.invocation_params.dir
    for case in cases:
        yield case
        plan = plan_of(case, option, base)
        if plan is not None:
            yield from variants(case, plan, _standins(config))


def _standins(config: pytest.Config) -> dict[str, object]:
    """The run's stand-in MCP servers declared so far (the ini's, the file's being collected)."""
    from pytest_agent_eval.plugin.mcp import declared

    return declared(config)
