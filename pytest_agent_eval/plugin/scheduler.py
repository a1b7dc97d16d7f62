"""Many agent calls in flight (SPEC §7): upcoming cases start early on the runner's loop.

They start while pytest runs earlier items.

Items still run one by one in collection order; each waits for its own case's future. A case is
started early ("prefetched") only when nothing it needs comes from its item's own setup: its agent
is a ``module:attr`` reference (``--agent`` or the file's ``agent:``) or a session-scoped ``agent``
fixture that an earlier item has already built, and an LLM check's ``agent_eval_llm`` has been built
too. Any other case runs when its turn comes.

The scheduler is a plugin object, registered only at concurrency > 1 (as xdist registers its
``DSession`` only with ``-n``); it is handed what it works with and reads no session state of its
own.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Collection, Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.run.eager import OffLoop

if TYPE_CHECKING:
    from pytest_agent_eval.adapters import Agent
    from pytest_agent_eval.core.results import CaseResult
    from pytest_agent_eval.llm import LLM

_UNSET: Any = object()
_SKIPS = frozenset(("skip", "skipif"))
Run = Coroutine[Any, Any, "CaseResult"]


class Early(Protocol):
    """How a case starts before its item's turn (``prepare.EarlyStart``)."""

    def run(self, item: pytest.Item, case: Case, llm: LLM | None) -> Run | None: ...

    def remember_agent(self, item: pytest.Item, agent: Agent) -> None: ...

    def close(self) -> None: ...


class Scheduler:
    """Starts upcoming cases' agent calls, bounded by the session's concurrency limit.

    :param concurrency: agent calls in flight at once in this process. :param early: builds a case's
    run without its item's setup. :param start: puts a run on the background loop (the current one:
    it is replaced when blocked). :param suspects: the node ids that must run alone (they were in
    flight when an xdist worker crashed). :param note: wraps a run to note it as in flight on an
    xdist worker (``None`` elsewhere). :param blocked: the results of cases whose agent blocked the
    loop, by ``id(case)``: never started again. :param uses_llm: whether a case has a check that
    needs ``agent_eval_llm``.
    """

    def __init__(
        self,
        *,
        concurrency: int,
        early: Early,
        start: Callable[[Run], concurrent.futures.Future[CaseResult]],
        suspects: Callable[[], Collection[str]],
        note: Callable[[str, Run], Run] | None,
        blocked: Mapping[int, CaseResult],
        uses_llm: Callable[[Case], bool],
    ) -> None:
        self.window = 2 * concurrency  # enough started cases to keep the limit saturated
        self.batch = max(1, concurrency // 8)
        """Cases started at once when the window has room for them (the first item fills it).

        Each start wakes a worker thread, which takes the GIL from pytest's thread: started one
        by one, every item paid a switch to a worker and back; a batch runs its starts back to back.
        The window less a batch still holds more than the limit: the limit stays saturated.
        """
        self.early = early
        self._start = start
        self._suspects = suspects
        self._note = note
        self._blocked = blocked
        self._uses_llm = uses_llm
        self.futures: dict[str, concurrent.futures.Future[CaseResult]] = {}
        self.llm: LLM | None = _UNSET
        self.next_item: pytest.Item | None = None
        """The item pytest runs after the current one (``pytest_runtest_protocol``)."""
        self._positions: dict[str, int] = {}
        self._cursor = 0
        """In ``session.items``: the first upcoming item not yet looked at (each is looked at once).
        """
        self.may_start: Callable[[], bool] = lambda: True
        """Whether a case may start now (the spend cap's, when one is set): no case starts early
        once it says no.
        """
        self._give_back_env = compat.keep_current_test_var()
        """Cases run while pytest moves between items: it keeps ``PYTEST_CURRENT_TEST`` set."""

    # -- hooks
    # ----------------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        self.next_item = nextitem

    # -- what comes next
    # -------------------------------------------------------------------------------------

    def _upcoming(self, item: pytest.Item) -> Iterator[tuple[int | None, pytest.Item]]:
        """The items after ``item`` not looked at yet, with their place in ``session.items``.

        The place is ``None`` on an xdist worker, whose queue changes as the controller sends items:
        there each pending item is looked at again.
        """
        items = item.session.items
        worker = compat.xdist_pending(item.config)
        if (
            worker is not None
        ):  # an xdist worker runs only what the controller sends it, in that order
            if worker:
                yield from ((None, items[i]) for i in worker)
            elif (
                self.next_item is not None
            ):  # its queue cannot be read: the next item is still known
                yield None, self.next_item
            return
        if not self._positions:
            self._positions = {it.nodeid: n for n, it in enumerate(items)}
        start = max(self._cursor, self._positions.get(item.nodeid, len(items)) + 1)
        for index in range(start, len(items)):
            yield index, items[index]

    def prefetch(self, item: pytest.Item) -> None:
        """Start the next cases after ``item`` that can run without their own item's setup.

        Until ``window`` cases started early wait for their items. A case that cannot start for now
        (its agent or LLM comes from a fixture not built yet) stops the look-ahead: it and those
        after it are looked at again after this item. Once the window is full, cases start again
        when it has room for a ``batch`` of them.
        """
        if len(self.futures) > self.window - self.batch:
            return
        for index, upcoming in self._upcoming(item):
            if len(self.futures) >= self.window or not self.may_start():
                break
            case = getattr(upcoming, "case", None)
            if (
                isinstance(case, Case)
                and upcoming.nodeid not in self.futures
                and self._can_start(upcoming, case)
            ):
                if self._uses_llm(case) and self.llm is _UNSET:
                    break
                run = self.early.run(upcoming, case, self.llm if self.llm is not _UNSET else None)
                if run is None:
                    break
                self.futures[upcoming.nodeid] = self.submit(upcoming, run)
            if index is not None:
                self._cursor = index + 1

    def submit(self, item: pytest.Item, coro: Run) -> concurrent.futures.Future[CaseResult]:
        """Start ``item``'s case on the loop (noted as in flight on an xdist worker).

        A run that needs no loop (``eager.OffLoop``) stays one when noted.
        """
        if self._note is not None:
            if isinstance(coro, OffLoop):
                coro = OffLoop(self._note(item.nodeid, coro.coro))
            else:
                coro = self._note(item.nodeid, coro)
        return self._start(coro)

    def alone(self, item: pytest.Item) -> bool:
        """Whether ``item``'s case must run alone: it was in flight when a worker crashed.

        Then the cases started early are waited for first, and none start while it runs.
        """
        if item.nodeid not in self._suspects():
            return False
        concurrent.futures.wait(list(self.futures.values()))
        return True

    def take(self, item: pytest.Item) -> concurrent.futures.Future[CaseResult] | None:
        """The future of ``item``'s case if it was started early."""
        return self.futures.pop(item.nodeid, None)

    # -- what a case needs
    # ------------------------------------------------------------------------------------

    def _can_start(self, item: pytest.Item, case: Case) -> bool:
        if id(case) in self._blocked:  # its agent blocked the loop once: not started again
            return False
        if getattr(
            item, "runs_no_agent", False
        ):  # a calibration item: its judge alone, at its turn
            return False
        if item.nodeid in self._suspects():  # runs alone, at its turn
            return False
        if case.error or case.skip or _marked_skip(item):
            return False
        # agent_eval_neo4j is its item's own
        return not (case.simulated_user is not None and case.simulated_user.uses_neo4j)

    def forget(self) -> None:
        """Drop the cases started early: they start again when needed.

        Their loop was left blocked.
        """
        for future in self.futures.values():
            future.cancel()
        self.futures.clear()

    def close(self) -> None:
        self.forget()
        self.early.close()
        self._give_back_env()


def _marked_skip(item: pytest.Item) -> bool:
    """Whether ``item`` or a node above it is marked ``skip`` or ``skipif``.

    One walk up the node chain, where ``get_closest_marker`` took one per name.
    """
    return any(mark.name in _SKIPS for mark in item.iter_markers())
