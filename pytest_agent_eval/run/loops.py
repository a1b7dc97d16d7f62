"""The event loops cases run on, how a blocked loop is seen and what a case that blocked it gets.

A loop runs inline in the main thread (one case at a time) or in a background thread. Pure asyncio,
no pytest.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import CaseResult, RunRecord, TrialResult
from pytest_agent_eval.run import eager
from pytest_agent_eval.run.blocking import in_worker
from pytest_agent_eval.run.slots import Slots
from pytest_agent_eval.run.stalls import Stall, blocked_message, running_step

if TYPE_CHECKING:  # asyncio loads with the first case that needs a loop (SPEC §27)
    import asyncio
    import concurrent.futures

T = TypeVar("T")


class InlineLoop:
    """An event loop in the calling (main) thread that runs one case at a time.

    No hand-off between threads. For concurrency 1. A signal (Ctrl-C, pytest-timeout) lands in the
    running case itself. A case starts outside the loop and goes on as a task on it only where it
    needs it (``eager``): most never do.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, made when a case first needs it: a case that never waits loads no asyncio."""
        if self._loop is None:
            import asyncio

            self._loop = asyncio.new_event_loop()
        return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        started = eager.start(coro)  # a case that never waits ends here, without a turn of the loop
        if isinstance(started, eager.Finished):
            return started.value
        loop = self.loop
        task = loop.create_task(started.rest())
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # interrupted while the case was waiting: stop it before going on
                task.cancel()
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(task)
            with contextlib.suppress(
                BaseException
            ):  # stopped before the task's first step, the run never resumed:
                started.context.run(
                    started.coro.close
                )  # its cleanups (a tool-mock recording) run in its context
            raise

    def close(self) -> None:
        if self._loop is None:  # no case needed it
            return
        with contextlib.suppress(RuntimeError):
            self._loop.run_until_complete(_cancel_pending())
        self._loop.close()


class LoopThread:
    """A background event loop for case coroutines while pytest runs items in the main thread."""

    BEAT = 0.05
    """Seconds between the loop's heartbeats: a loop that misses them is blocked."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._beat = time.monotonic()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="agent-eval-loop", daemon=True
        )
        self._thread.start()
        self.loop.call_soon_threadsafe(self._heartbeat)

    def _heartbeat(self) -> None:
        self._beat = time.monotonic()
        self.loop.call_later(self.BEAT, self._heartbeat)

    def blocked(self) -> Stall:
        """How long the loop has not turned, and the case whose agent holds it (if one does)."""
        now = time.monotonic()
        step = running_step(self._thread)
        if step is not None:  # an agent's step runs on the loop now: it holds the loop
            return Stall(now - step.started, step.case)
        return Stall(max(0.0, now - self._beat - self.BEAT), None)

    def wait_case(
        self, future: concurrent.futures.Future[CaseResult], case: Case, timeout: float | None
    ) -> CaseResult | Stall:
        """The case's result, or what blocks the loop when it is blocked for too long.

        What blocks the loop is returned when an agent holds it for longer than its own case's
        timeout (``timeout`` if that case sets none), or something else for longer than
        this case's: no timeout on the loop can fire meanwhile. This case is cancelled then.

        Looked at also while waiting for a case without a timeout: another case's agent may block
        the loop then, and the timeouts of every case in flight would run out behind it.
        """
        import concurrent.futures

        own = case.timeout if case.timeout is not None else timeout
        while True:
            try:
                return future.result(timeout=0.1 if own is None else min(own, 0.1))
            except concurrent.futures.TimeoutError:
                pass
            except BaseException:
                future.cancel()
                raise
            stall = self.blocked()
            culprit = stall.culprit
            # an agent holds the loop: its own case's limit, whichever case is waited for; else this
            # case's
            allowed = (
                own
                if culprit is None
                else culprit.timeout
                if culprit.timeout is not None
                else timeout
            )
            if allowed is not None and stall.seconds > allowed:
                future.cancel()  # its task is cancelled if the loop turns again
                return stall

    def abandon(self) -> None:
        """Leave this (blocked) loop.

        What runs on it is cancelled and it stops if it ever turns again; its thread, a daemon,
        is stopped at the session's end if it still runs (``stop_abandoned``).
        """
        with contextlib.suppress(RuntimeError):
            self.submit(_cancel_pending_then_stop())

    def stop_abandoned(self) -> None:
        """Stop this abandoned loop's thread if an agent still holds it (it spins in Python).

        SystemExit is raised in it, again while it runs (for a second of tries): the case's runner
        takes the first as the agent's exit and the loop may go on to another spinning case. A
        thread blocked in C code stops when that call returns. Left running, a spinning thread met
        the interpreter's finalization (a crash at exit, seen on Python 3.10) and took the GIL from
        the rest of the session's end.
        """
        from pytest_agent_eval import compat

        for _ in range(10):
            if not compat.raise_in_thread(self._thread, SystemExit):
                return  # ended, or no way to stop it
            self._thread.join(timeout=0.1)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for it here."""
        return wait(self.submit(coro))

    def close(self) -> None:
        """Cancel what is still running, then stop the loop.

        What still runs is cases started early and never needed.
        """
        import concurrent.futures

        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.submit(_cancel_pending()).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class Loops:
    """Where a session's cases run, and the one owner of what a blocked loop means.

    It holds the loop in this thread (concurrency 1) or the background loop, the concurrency limit
    on it, the cases whose agent blocked the background loop (failed so, never started again) and
    replacing that loop.
    """

    def __init__(self, concurrency: int, timeout: float | None) -> None:
        self.concurrency = concurrency
        self.timeout = timeout
        """The session's default case timeout (``--agent-eval-timeout``)."""
        self.blocked: dict[int, CaseResult] = {}
        """Cases whose agent blocked the background loop, by ``id(case)``.

        They failed so, and never start again.
        """
        self._background: LoopThread | None = None
        self._left: list[LoopThread] = []
        """Loops left behind blocked, stopped at ``close`` if still held."""
        self._runner: InlineLoop | LoopThread | None = None
        self._limit: asyncio.Semaphore | Slots | None = None
        self._off_loop: OffLoopRuns | None = None
        self.on_leave: Callable[[], None] | None = None
        """Called when a blocked loop is left behind, before it is.

        The scheduler drops the cases it started.
        """

    @property
    def background(self) -> LoopThread:
        """The background loop (a new one once a blocked one was left behind)."""
        if self._background is None:
            self._background = LoopThread()
        return self._background

    @property
    def runner(self) -> InlineLoop | LoopThread:
        """Where a case runs when its item's turn comes.

        In this thread at concurrency 1 (unless an event loop already runs here), else on the
        background loop, beside the cases started early.
        """
        if self._runner is None:
            from pytest_agent_eval import compat

            if self.concurrency == 1 and compat.running_loop() is None:
                self._runner = InlineLoop()  # its limit is made when asked for: see ``limit``
            else:
                # shared with the cases that run in worker threads (``eager.OffLoop``)
                self._runner, self._limit = self.background, Slots(self.concurrency)
        return self._runner

    @property
    def inline(self) -> bool:
        """Whether cases run in this thread, one at a time (``InlineLoop``)."""
        return self.runner is not self._background

    @property
    def limit(self) -> asyncio.Semaphore | Slots:
        """Bounds agent calls in flight across cases and trials, on the runner's loop."""
        self.runner  # noqa: B018 - made with the runner (the background loop's)
        if self._limit is None:  # the inline loop's: asked for by a case with several trials
            import asyncio

            self._limit = asyncio.Semaphore(1)
        return self._limit

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the background loop; an ``eager.OffLoop`` run in a worker thread."""
        if isinstance(coro, eager.OffLoop):
            if self._off_loop is None:
                self._off_loop = OffLoopRuns(self.concurrency)
            return self._off_loop.submit(coro.coro, self.background)
        return self.background.submit(coro)

    def wait(
        self, future: concurrent.futures.Future[CaseResult], case: Case, retried: bool
    ) -> CaseResult | None:
        """``case``'s result from the background loop.

        When an agent blocks that loop past its case's timeout, the culprit fails and the loop is
        left behind; ``case``, if it is not the culprit, gets ``None``: run it once more on a fresh
        loop. Blocked by something other than an agent, or ``retried``, it fails as blocked (it
        cannot be told apart from the culprit).
        """
        if future.done():  # most often, at concurrency > 1: the case started early and ended
            return wait(future)
        outcome = self.background.wait_case(future, case, self.timeout)
        if isinstance(outcome, CaseResult):
            return outcome
        self.leave_blocked(outcome)
        if outcome.culprit is None or retried:
            return blocked_result(case, outcome, case.timeout or self.timeout)
        return None

    def leave_blocked(self, stall: Stall) -> None:
        """Handle a blocked background loop: fail its culprit and leave the loop behind.

        The culprit never starts again; upcoming cases start afresh on a new loop.
        """
        culprit = stall.culprit
        if self.on_leave is not None:
            self.on_leave()
        if culprit is not None:
            limit = culprit.timeout if culprit.timeout is not None else self.timeout
            self.blocked[id(culprit)] = blocked_result(culprit, stall, limit)
        if self._background is not None:
            self._background.abandon()
            self._left.append(self._background)
            if self._runner is self._background:
                self._runner = None  # made again, with its concurrency limit, on the new loop
            self._background = None

    def close(self) -> None:
        """Close the session's loops, and stop the threads of loops left behind still held."""
        if self._runner is not None and self._runner is not self._background:  # the inline loop
            self._runner.close()
        self._runner = None
        if self._background is not None:
            self._background.close()
            self._background = None
        for left in self._left:
            left.stop_abandoned()
        self._left.clear()


def blocked_result(case: Case, stall: Stall, limit: float | None) -> CaseResult:
    """The failure of a case that blocked the event loop, or could not answer while it was blocked.

    The case blocked it as ``stall.culprit``, or could not answer while something other than an
    agent blocked it.
    """
    if stall.culprit is case:
        error = blocked_message(case, stall.seconds, limit, ongoing=True)
    else:
        error = (
            f"agent did not answer within {limit:g} s: "
            f"the event loop was blocked for {stall.seconds:.1f} s"
        )
    run = RunRecord(latency_s=stall.seconds, error=error, timed_out=True)
    trial = TrialResult(run, [], False, 0.0, [error])
    return CaseResult(case, [trial], False, 0.0)


class OffLoopRuns:
    """Runs that need no loop (``eager.OffLoop``), in at most ``limit`` worker threads at once.

    In the order they came: a thread that ends one takes the next waiting one itself (no hand-over
    to another thread), and a run waiting for its turn holds no thread. ``limit`` is the
    concurrency: more could only wait for the limit's ``Slots``.
    """

    def __init__(self, limit: int) -> None:
        import concurrent.futures  # once, not an import statement per case

        self._future = concurrent.futures.Future
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: collections.deque[Callable[[], None]] = collections.deque()
        self._running = 0

    def submit(
        self, coro: Coroutine[Any, Any, T], background: LoopThread
    ) -> concurrent.futures.Future[T]:
        """Run ``coro`` in a worker thread; awaiting ``eager.needs_loop``, its rest on the loop.

        The future is settled as ``asyncio.run_coroutine_threadsafe``'s would be. Cancelled before
        its turn, the run never starts; once it runs on the loop, cancelling cancels its task.
        """
        future: concurrent.futures.Future[T] = self._future()
        job = functools.partial(_off_loop, coro, background, future)
        with self._lock:
            if self._running >= self._limit:
                self._waiting.append(job)
                return future
            self._running += 1
        in_worker(functools.partial(self._work, job))
        return future

    def _work(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                if not self._waiting:
                    self._running -= 1
                    return
                job = self._waiting.popleft()


def _off_loop(
    coro: Coroutine[Any, Any, T],
    background: LoopThread,
    future: concurrent.futures.Future[T],
) -> None:
    """Step ``coro`` here to its end, or to ``eager.needs_loop`` and its rest on ``background``."""
    if future.cancelled():
        coro.close()
        return
    try:
        started = eager.start(coro)
    except BaseException as exc:
        if future.set_running_or_notify_cancel():
            future.set_exception(exc)
        return
    if isinstance(started, eager.Finished):
        if future.set_running_or_notify_cancel():
            future.set_result(started.value)
        return
    try:  # it wants the loop after all
        rest = background.submit(started.rest())
    except BaseException as exc:  # the loop is closed: the run's cleanups, in its context
        with contextlib.suppress(BaseException):
            started.context.run(started.coro.close)
        if future.set_running_or_notify_cancel():
            future.set_exception(exc)
        return
    rest.add_done_callback(lambda done: _copy(done, future))
    future.add_done_callback(lambda done: rest.cancel() if done.cancelled() else None)


def _copy(source: concurrent.futures.Future[T], to: concurrent.futures.Future[T]) -> None:
    if source.cancelled():
        to.cancel()
        return
    if not to.set_running_or_notify_cancel():
        return
    exc = source.exception()
    if exc is not None:
        to.set_exception(exc)
    else:
        to.set_result(source.result())


def wait(future: concurrent.futures.Future[T]) -> T:
    """The future's result.

    When the wait is interrupted (Ctrl-C, pytest-timeout), its case is stopped too.
    """
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


async def _cancel_pending() -> None:
    import asyncio

    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _cancel_pending_then_stop() -> None:
    """Cancel what runs on this loop, let it finish, then stop.

    Its context managers exit in their own tasks.
    """
    import asyncio

    await _cancel_pending()
    asyncio.get_running_loop().stop()
