"""Many agent calls in flight (SPEC §7): upcoming cases start on the runner's loop while pytest runs earlier items.

Items still run one by one in collection order; each waits for its own case's future. A case is started early
("prefetched") only when nothing it needs comes from its item's own setup: its agent is a ``module:attr``
reference (``--agent`` or the file's ``agent:``) or a session-scoped ``agent`` fixture that an earlier item has
already built, and an LLM check's ``agent_eval_llm`` has been built too. Any other case runs when its turn comes.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.agents import Agent, resolve
from pytest_agent_eval.case_mocks import session_responses
from pytest_agent_eval.cases.model import Case
from pytest_agent_eval.llm import LLM
from pytest_agent_eval.mocks import MockConfigError, MockPlan, ToolMocks
from pytest_agent_eval.runner import CaseResult, RecorderFactory, RunSettings, run_case
from pytest_agent_eval.state import EvalSession

_UNSET: Any = object()


class Scheduler:
    """Starts upcoming cases' agent calls, bounded by the session's concurrency limit."""

    def __init__(self, state: EvalSession, session: pytest.Session):
        self.state = state
        self.session = session
        self.window = 2 * state.settings.concurrency  # enough started cases to keep the limit saturated
        self.futures: dict[str, concurrent.futures.Future[CaseResult]] = {}
        self.fixture_agents: dict[int, Agent] = {}
        """Agents from session-scoped ``agent`` fixtures, by fixture definition."""
        self.llm: LLM | None = _UNSET
        self.mocks = ToolMocks(held=True)
        """Holds declarative dispatch patches for prefetched cases until the session ends."""
        self._positions: dict[str, int] = {}

    # -- what comes next -------------------------------------------------------------------------------------

    def _upcoming(self, item: pytest.Item) -> Iterator[pytest.Item]:
        items = self.session.items
        worker = compat.xdist_pending(self.session.config)
        if worker is not None:  # an xdist worker runs only what the controller sends it, in that order
            if worker:
                yield from (items[i] for i in worker)
            elif self.state.next_item is not None:  # its queue cannot be read: the next item is still known
                yield self.state.next_item
            return
        if not self._positions:
            self._positions = {it.nodeid: n for n, it in enumerate(items)}
        start = self._positions.get(item.nodeid, len(items)) + 1
        yield from items[start:]

    def prefetch(
        self, item: pytest.Item, make_settings: Callable[[Case, LLM | None, RecorderFactory], RunSettings]
    ) -> None:
        """Start the next cases after ``item`` that can run without their own item's setup."""
        started = 0
        for upcoming in self._upcoming(item):
            if started >= self.window:
                break
            case = getattr(upcoming, "case", None)
            if not isinstance(case, Case):
                continue
            started += 1
            if upcoming.nodeid in self.futures or not self._can_start(upcoming, case):
                continue
            agent = self._agent_for(upcoming, case)
            recorder = self._recorder(case)
            if agent is None or recorder is None:
                continue
            llm = self.llm if self.llm is not _UNSET else None
            self.futures[upcoming.nodeid] = self.submit(
                upcoming, run_case(case, agent, make_settings(case, llm, recorder))
            )

    def submit(self, item: pytest.Item, coro: Coroutine[Any, Any, CaseResult]) -> concurrent.futures.Future[CaseResult]:
        """Start ``item``'s case on the loop (noted as in flight on an xdist worker)."""
        inflight = self.state.inflight
        return self.state.loop.submit(coro if inflight is None else inflight.around(item.nodeid, coro))

    def alone(self, item: pytest.Item) -> bool:
        """Whether ``item``'s case must run alone: it was in flight when a worker crashed. Then the cases started
        early are waited for first, and none start while it runs."""
        inflight = self.state.inflight
        if inflight is None or item.nodeid not in inflight.suspects():
            return False
        concurrent.futures.wait(list(self.futures.values()))
        return True

    def take(self, item: pytest.Item) -> concurrent.futures.Future[CaseResult] | None:
        """The future of ``item``'s case if it was started early."""
        return self.futures.pop(item.nodeid, None)

    # -- what a case needs ------------------------------------------------------------------------------------

    def _can_start(self, item: pytest.Item, case: Case) -> bool:
        if id(case) in self.state.blocked:  # its agent blocked the loop once: not started again
            return False
        inflight = self.state.inflight
        if inflight is not None and item.nodeid in inflight.suspects():  # runs alone, at its turn
            return False
        if case.error or case.skip or item.get_closest_marker("skip") or item.get_closest_marker("skipif"):
            return False
        if case.simulated_user is not None and case.simulated_user.uses_neo4j:  # agent_eval_neo4j: its item's own
            return False
        return not (self.state.checks.case_uses_llm(case) and self.llm is _UNSET)

    def _agent_for(self, item: pytest.Item, case: Case) -> Agent | None:
        ref = self.state.settings.agent or case.agent
        if ref:
            try:
                return resolve(ref, self.state.agent_instances)
            except Exception:
                return None
        definition = _agent_fixture(item)
        return self.fixture_agents.get(id(definition)) if definition is not None else None

    def _recorder(self, case: Case) -> RecorderFactory | None:
        settings = self.state.settings
        try:
            dispatch = case.tool_dispatch or settings.tool_dispatch
            if dispatch:
                self.mocks.patch(dispatch)
            plan = MockPlan.for_case(case, session_responses(self.session.config), settings.unmocked_tools)
            plan.require_patched(dispatched=bool(dispatch), others=False)  # others: the running item's patches
        except MockConfigError:
            return None  # the item reports it when its turn comes
        return self.mocks.recorder(plan)

    def remember_fixture_agent(self, item: pytest.Item, agent: Agent) -> None:
        """Keep an agent built by a session-scoped ``agent`` fixture for later cases that use the same one."""
        definition = _agent_fixture(item)
        if definition is not None and definition.scope == "session":
            self.fixture_agents[id(definition)] = agent

    def forget(self) -> None:
        """Drop the cases started early (their loop was left blocked): they start again when needed."""
        for future in self.futures.values():
            future.cancel()
        self.futures.clear()

    def close(self) -> None:
        self.forget()
        self.mocks.undo()


def _agent_fixture(item: pytest.Item) -> Any:
    """The ``agent`` fixture definition that applies to ``item``, if any."""
    return compat.fixture_definition(item, "agent")
