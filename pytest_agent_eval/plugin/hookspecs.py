"""Hooks of pytest-agent-eval that plugins and conftest.py files implement."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_agent_eval.adapters import AdapterRegistry
    from pytest_agent_eval.cases.dialects import DialectRegistry
    from pytest_agent_eval.checks import CheckRegistry
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.core.results import CaseResult, RunRecord


@pytest.hookspec(historic=True)
def pytest_agent_eval_register_checks(registry: CheckRegistry) -> None:
    """Add checks usable under ``expect:`` with ``registry.register(name, func, schema)``.

    Called before the first eval file is read; a ``conftest.py`` that loads later (a
    sub-directory's) is called when it loads, before the files below it are read. ``agent-eval
    validate`` calls it too (docs/reference/hooks.md).

    :param registry: the session's checks; ``register(name, func, schema, description, uses_llm=,
        blocking=)``.
    """


@pytest.hookspec(historic=True)
def pytest_agent_eval_register_dialects(registry: DialectRegistry) -> None:
    """Add file formats with ``registry.register(Dialect(name, detect, load))``.

    ``Dialect`` is ``pytest_agent_eval.Dialect``.

    Called before the first eval file is read; a ``conftest.py`` that loads later (a
    sub-directory's) is called when it loads, before the files below it are read. ``agent-eval
    validate`` calls it too (docs/reference/hooks.md).

    :param registry: the session's file formats, tried in order by each one's ``detect``.
    """


@pytest.hookspec(historic=True)
def pytest_agent_eval_register_adapters(registry: AdapterRegistry) -> None:
    """Add framework adapters with ``registry.register(adapter)`` (``pytest_agent_eval.Adapter``).

    Called when the first agent is resolved; a ``conftest.py`` that loads later is called when it
    loads. Adapters registered here are tried in registration order, before the built-in ones
    (``plain`` callables last). ``agent-eval validate`` calls it too (see docs/reference/hooks.md).

    :param registry: the session's adapters; ``register(adapter)`` with ``name``, ``recognises``,
        ``agent``, ``normalise``, ``wrap_tool`` and ``mock_tools`` (see
        ``pytest_agent_eval.adapters.base``).
    """


def pytest_agent_eval_register_formats(config: pytest.Config) -> None:
    """Add report formats with ``add_format(config, name, make, option=)``.

    ``add_format`` is ``pytest_agent_eval.report.formats``'s: ``make(config, records)`` makes the
    format's plugin object, registered only when ``option`` is set.

    Called once, in ``pytest_configure``, on the xdist controller (or the only process): workers
    write no report, their records reach the controller. The built-in formats are added first (the
    plugin's own implementation).

    :param config: the run's config; a format reads its options from it.
    """


@pytest.hookspec(firstresult=True)
def pytest_agent_eval_evaluate_assertion(
    assertion: dict[str, Any], run: RunRecord, case: Case
) -> Any:
    """Evaluate a conversation's ``expression`` assertion (SPEC §9), e.g.

    the conversation job's Kotlin expressions on the agent's state; the first non-``None`` answer
    wins.

    Called after the conversation, in a worker thread (it may block). Without an answer the
    assertion is "not scored" (left out of the assertions part), never a made-up pass or fail.

    :param assertion: the assertion as written, ``{"expression": ..., "weight": ...}``.
    :param run: the conversation's run record (``history`` is the transcript, ``tool_calls`` every
        call).
    :param case: the case (``case.simulated_user`` holds the tasks and assertions).
    :return: ``True``/``False``, a score in 0..1 (passing at 0.5), a ``CheckResult``, or ``None``
        to pass.
    """


def pytest_agent_eval_case_result(item: pytest.Item, result: CaseResult) -> None:
    """Called after a case ran (all its trials), before its verdict is reported.

    Runs where the case ran: on an xdist worker under ``-n``, not on the controller. A reporter on
    the controller reads the case's record instead: ``report.agent_eval`` (a JSON-able dict) of the
    item's test report in ``pytest_runtest_logreport``.

    :param item: the eval item (``item.case`` is its case).
    :param result: the verdict over all trials: ``passed``, ``score``, ``trials`` with each run and
        check result.
    """


@pytest.hookspec(firstresult=True)
def pytest_agent_eval_failure_lines(
    item: pytest.Item, result: CaseResult, verbose: int
) -> list[str] | None:
    """The failure text of a failed case, as lines.

    The first implementation that returns a list wins.

    The plugin's own implementation (``report.failure.failure_lines``) runs last; return ``None`` to
    leave a case to it. Unlike ``pytest_assertrepr_compare``, no other plugin answers this hook by
    accident.

    :param item: the case's item (``item.case`` is the case).
    :param result: the case's result: its trials, each with its checks, violations and run record.
    :param verbose: pytest's verbosity (``-v`` is 1); the plugin adds ``-v`` details as report
        sections itself.
    """
