"""The pytest layer of pytest-agent-eval (the ``pytest11`` entry point): the hooks only.

Each hook delegates to the module of its concern beside it (collect, execute, prepare, options,
state, scheduler, ...).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agent_eval import compat, imports, secrets
from pytest_agent_eval.plugin import hookspecs, options, signals, skipping, stopping
from pytest_agent_eval.plugin.fixtures import (  # noqa: F401 - the plugin's fixtures
    agent_eval_case,
    agent_eval_llm,
    agent_eval_neo4j,
    tool_mocks,
)
from pytest_agent_eval.plugin.state import EVAL_ITEM, STATE, EvalSession, get_state

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import CaseResult
    from pytest_agent_eval.plugin.collect import EvalFile


FEATURES = (
    "pytest_agent_eval.plugin.reports",
    "pytest_agent_eval.plugin.shards",
    "pytest_agent_eval.plugin.github",
    "pytest_agent_eval.plugin.spendcap",
    "pytest_agent_eval.plugin.cache",
    "pytest_agent_eval.plugin.memory",
    "pytest_agent_eval.plugin.injection",
    "pytest_agent_eval.plugin.calibration",
    "pytest_agent_eval.plugin.mcp",
    "pytest_agent_eval.plugin.trust",
    "pytest_agent_eval.plugin.traces",
    "pytest_agent_eval.plugin.traffic",
)
"""One module per feature, each owning its options (``pytest_addoption``), its ``pytest_configure``
and its plugin objects, as pytest's ``junitxml`` and ``terminal`` do; registered here, in this
order, before the options are read. A feature module imports only pytest and what its options need
at the top: its engine loads in its ``pytest_configure`` once an option asks for it (SPEC §27).
"""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    for name in FEATURES:
        pluginmanager.register(
            importlib.import_module(name), name.replace("pytest_agent_eval.plugin.", "agent_eval_")
        )


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # Again for this config: a pytest session run in a process that imported the package already
    # (pytester's in-process runs) marked it for rewriting afresh, and its modules loaded later
    # (many in worker threads, where CPython 3.11's ast.parse is not thread-safe) were rewritten.
    compat.leave_assertion_rewriting("pytest_agent_eval")
    config.addinivalue_line(
        "markers", "agent_eval: an eval case collected from a YAML/JSON file (pytest-agent-eval)"
    )
    state = config.stash[STATE] = EvalSession(config)
    # Among the first cleanups, so it runs after pytest's own, whose garbage collections then skip
    # the frozen items.
    config.add_cleanup(state.thaw)
    imports.add_root(config.rootpath)
    if (
        state.settings.concurrency > 1
    ):  # as xdist registers its DSession only with -n: concurrency 1 pays nothing
        from pytest_agent_eval.plugin.prepare import register_scheduler

        register_scheduler(config)
    if config.getoption("agent_eval_resume", None):
        from pytest_agent_eval.plugin import resume

        resume.configure(config)
    signals.install()
    if compat.hands_out_cases(config):  # as xdist's own DSession: workers are started
        from pytest_agent_eval.plugin.crashes import CrashReporter

        # names the cases a crash hit
        config.pluginmanager.register(CrashReporter(config), "agent_eval_crashes")


def pytest_unconfigure(config: pytest.Config) -> None:
    signals.restore()
    secrets.forget()  # a session's secrets are its own
    imports.remove_root(config.rootpath)
    if STATE in config.stash:
        config.stash[STATE].close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> EvalFile | None:
    settings = get_state(parent.config).settings
    explicit = parent.session.isinitpath(file_path)
    if options.is_eval_file(file_path, settings.file_patterns, explicit) or options.orphan_sidecar(
        file_path, settings.file_patterns, explicit
    ):
        from pytest_agent_eval.plugin.collect import (
            EvalFile,
        )  # the engine loads with the first eval file

        return EvalFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    state = get_state(session.config)
    if (
        state.eval_items
    ):  # the items are made: the collector need not go over them while the cases run
        from pytest_agent_eval import gc_policy

        gc_policy.freeze_collected(state, state.eval_items)


@pytest.hookimpl(trylast=True)
def pytest_agent_eval_failure_lines(
    item: pytest.Item, result: CaseResult, verbose: int
) -> list[str]:
    from pytest_agent_eval.report.failure import (
        failure_lines,
    )  # with the checks: loaded by the first failure

    return failure_lines(result, verbose)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    eval_item = item.stash.get(EVAL_ITEM, False)
    if eval_item and call.excinfo is not None:
        from pytest_agent_eval.plugin.execute import (
            InfrastructureError,
        )  # loaded by the eval item's run

        if isinstance(
            call.excinfo.value, InfrastructureError
        ):  # the plugin's own class, not one of that name
            # carried to the xdist controller
            report.agent_eval_infra = True  # type: ignore[attr-defined]
    skipping.place(item, report)
    stopping.note_report(item, report)
    # eval items only (other tests load no record code), on the report that carries the record:
    # the call's, or the setup's when the case never got to run
    if eval_item and (report.when == "call" or (report.when == "setup" and not report.passed)):
        _attach()(item, report)
    return report


@functools.cache
def _attach() -> Callable[[pytest.Item, pytest.TestReport], None]:
    """``report.attach.attach``, loaded with the first eval item's report (no import per report)."""
    from pytest_agent_eval.report.attach import attach

    return attach


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, str] | None:
    if (
        getattr(report, "agent_eval_infra", False) and report.failed
    ):  # infrastructure, not the agent: apart
        return "error", "E", "ERROR"
    return None
