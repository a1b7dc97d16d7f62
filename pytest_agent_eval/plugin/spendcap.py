"""The spend cap (SPEC §25): no case starts once the run's known spend has reached X.

With ``--agent-eval-max-cost X`` (ini ``agent_eval_max_cost``). Cases already started (in flight, or
started early at ``--agent-eval-concurrency`` > 1) finish; every case not started is "not run: spend
cap" in every report (the JSON report's ``not_run``, so ``--agent-eval-resume`` runs it later), and
the run fails. The option keeps its end-of-run meaning too: a suite threshold on the total cost
(``report.thresholds``).

The known spend is the cost of the cases that finished (their agents' reported or priced usage; a
case whose cost is unknown adds nothing). It is one number for the whole run, kept where the run's
pace is kept (SPEC §18): a file in the run's cache directory under a lock, or Redis with
``--agent-eval-rate-limit-url``. Each run has its own key, made by the xdist controller (or the only
process) and handed to its workers.

A plugin object in every process that runs cases (each xdist worker holds back its own items); the
controller names the cases held back, which the workers send it when they finish.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval import compat

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import CaseResult
    from pytest_agent_eval.traffic.spend import Tally

_KEY = "agent_eval_spend_key"
"""The ``workerinput`` key with which the controller hands its workers the run's spend key."""
_HELD = "agent_eval_spend_held"
"""The ``workeroutput`` key with which a worker tells the controller the cases it held back."""


def max_cost(config: pytest.Config) -> float | None:
    """``--agent-eval-max-cost`` or ini ``agent_eval_max_cost``.

    ``None`` when neither is set (a bad ini value is the report options' usage error).
    """
    given = config.getoption("agent_eval_max_cost", None)
    if given is not None:
        return float(given)
    text = str(config.getini("agent_eval_max_cost")).strip()
    try:
        return float(text) if text else None
    except ValueError:
        return None


class SpendCap:
    """Holds back the cases not yet started once the run's known spend has reached ``cap``."""

    def __init__(self, config: pytest.Config, cap: float, key: str) -> None:
        self.config = config
        self.cap = cap
        self.key = key
        self._tally: Tally | None = None
        self.reached: str | None = None
        """Why cases are held back (the spend and the cap, or the store's failure); ``None`` until
        they are.
        """
        self.held: list[str] = []
        self.spent = 0.0

    def tally(self) -> Tally:
        if self._tally is None:
            from pytest_agent_eval.plugin.state import get_state, limits_folder
            from pytest_agent_eval.traffic.spend import open_tally

            url = get_state(self.config).settings.traffic.rate_limit_url
            self._tally = open_tally(limits_folder(self.config), url, self.key)
        return self._tally

    def may_start(self) -> bool:
        """Whether a case may start: the known spend is below the cap.

        A store that cannot be read stops the run's spending (the spend cannot be told).
        """
        if self.reached is not None:
            return False
        from pytest_agent_eval.traffic.store import StoreError

        try:
            self.spent = self.tally().total()
        except StoreError as exc:
            self.reached = f"not run: spend cap: the run's spend cannot be read ({exc})"
            return False
        if self.spent >= self.cap:
            self.reached = (
                f"not run: spend cap: the known spend {self.spent:.4f} reached"
                f" --agent-eval-max-cost {self.cap:g}"
            )
            return False
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_agent_eval.plugin.state import get_state

        scheduler = get_state(session.config).scheduler
        if scheduler is not None:  # no case starts early once the cap is reached
            scheduler.may_start = self.may_start

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        """An eval item whose case has not started is not run once the cap is reached.

        No report, no record.
        """
        from pytest_agent_eval.plugin.state import EVAL_ITEM, get_state

        if not item.stash.get(EVAL_ITEM, False):
            return None
        scheduler = get_state(item.config).scheduler
        if (
            scheduler is not None and item.nodeid in scheduler.futures
        ):  # started early: in flight, it finishes
            return None
        if self.may_start():
            return None
        self.held.append(item.nodeid)
        output = compat.worker_output(item.config)
        if output is not None:
            output[_HELD] = [self.held, self.reached]
        else:
            _note_held(item.config, self.held, self.reached)
        return True

    def pytest_agent_eval_case_result(self, item: pytest.Item, result: CaseResult) -> None:
        """The case's known cost joins the run's spend."""
        from pytest_agent_eval.report.record import usage

        costs = [usage(trial.run)[1] for trial in result.trials]
        cost = sum(c for c in costs if c is not None)
        if cost > 0:
            from pytest_agent_eval.traffic.store import StoreError

            try:
                self.tally().add(cost)
            except StoreError as exc:
                self.reached = f"not run: spend cap: the run's spend cannot be kept ({exc})"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """On the xdist controller: each worker adds to this run's spend."""
        node.workerinput[_KEY] = self.key

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        held = compat.node_output(node).get(_HELD)
        if isinstance(held, list) and len(held) == 2 and isinstance(held[0], list):
            self.held += [n for n in held[0] if isinstance(n, str)]
            self.reached = self.reached or str(held[1])
            _note_held(self.config, self.held, self.reached)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None]:
        """Cases held back fail the run (as a missed threshold does, after the baseline gate)."""
        yield
        if self.held and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.held and self.reached is not None:
            count = f"{len(self.held)} case{'s' if len(self.held) != 1 else ''}"
            terminalreporter.write_line(
                f"agent eval spend cap: {count} not started "
                f"({self.reached.removeprefix('not run: spend cap: ')}); run them later with "
                "--agent-eval-resume REPORT",
                red=True,
                bold=True,
            )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._tally is not None:
            self._tally.close()
        if not compat.is_worker(config):  # the controller, last to finish: the run's file goes
            from pytest_agent_eval.plugin.state import limits_folder

            (limits_folder(config) / f"spend_{self.key}.json").unlink(missing_ok=True)


def _note_held(config: pytest.Config, held: list[str], reason: str | None) -> None:
    """The controller's records name the held cases with the cap's reason."""
    from pytest_agent_eval.report.collector import records

    collector = records(config)
    if collector is not None:
        for nodeid in held:
            collector.held[nodeid] = reason or "not run: spend cap"


def pytest_configure(config: pytest.Config) -> None:
    cap = max_cost(config)
    if cap is None:
        return
    given = compat.worker_input(config)
    key = str(given.get(_KEY)) if given is not None and given.get(_KEY) else uuid.uuid4().hex
    config.pluginmanager.register(SpendCap(config, cap, key), "agent_eval_spend_cap")
