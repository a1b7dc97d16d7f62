"""Blocking calls (sync agents, custom checks, LLM judges) made from the runner's event loop.

``in_thread`` runs the call in a reused daemon thread, so the loop goes on with other cases and a
hung call can be abandoned at its timeout. ``outside_loop`` runs it in the loop's own thread, for
when the loop has nothing else to do (concurrency 1, no timeout): no hand-off between threads, which
dominates fast calls.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_agent_eval import compat
from pytest_agent_eval.faults import escape

if TYPE_CHECKING:
    import asyncio


class _Workers:
    """Daemon threads that take blocking calls one at a time.

    One more starts when every thread is busy. Threads are kept for the process: a hung call keeps
    its own thread, and never blocks exit.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._starts: queue.SimpleQueue[None] | None = None
        """Threads to start, for the starter thread (``submit(..., start_here=False)``)."""

    def submit(self, job: Callable[[], None], *, start_here: bool = True) -> None:
        """Run ``job`` in an idle thread, else in one more.

        ``start_here=False``: the caller does not wait for a new thread to start (``Thread.start``
        waits until it runs): a starter thread starts it.
        """
        starts = None
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that thread is reserved for this job
            elif not start_here:
                if self._starts is None:  # the first time: the starter starts here, once
                    self._starts = queue.SimpleQueue()
                    threading.Thread(
                        target=self._start_each,
                        args=(self._starts,),
                        name="agent-eval-starter",
                        daemon=True,
                    ).start()
                starts = self._starts
        self._jobs.put(job)
        if starts is not None:
            starts.put(None)
        elif start:
            self._start()

    def _start(self) -> None:
        threading.Thread(target=self._work, name="agent-eval-call", daemon=True).start()

    def _start_each(self, starts: queue.SimpleQueue[None]) -> None:
        while True:
            starts.get()
            self._start()

    def _work(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


def in_worker(job: Callable[[], None]) -> None:
    """Run ``job`` in one of the reused worker threads (it hands back its own outcome).

    The caller never waits for a thread to start: pytest's own thread hands cases over so, and a
    thread start there waits for the new thread to run, behind every other thread that wants the
    GIL.
    """
    _WORKERS.submit(job, start_here=False)


async def in_thread(func: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking call in a worker thread, in a copy of the caller's context, and await it."""
    import asyncio  # loaded by then: the call awaits on a running loop

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def job() -> None:
        try:
            outcome: tuple[bool, Any] = (True, ctx.run(func, *args))
        except (
            BaseException
        ) as exc:  # handed to the awaiting task, as an exception a future can hold
            outcome = (False, escape(exc))
        with contextlib.suppress(
            RuntimeError
        ):  # the loop closed while a timed-out call was still running
            loop.call_soon_threadsafe(settle, *outcome)

    _WORKERS.submit(job)
    return await future


def outside_loop(func: Callable[..., Any], *args: Any) -> Any:
    """Call ``func`` in this thread as if no event loop ran here.

    So it may run its own (``asyncio.run``).
    """
    running = compat.running_loop()
    if running is None:
        return func(*args)
    if not compat.set_running_loop(None):  # cannot hide the loop here: a thread of its own has none
        return _in_own_thread(func, *args)
    try:
        return func(*args)
    finally:
        compat.set_running_loop(running)


def _in_own_thread(func: Callable[..., Any], *args: Any) -> Any:
    outcome: list[tuple[bool, Any]] = []
    ctx = contextvars.copy_context()

    def job() -> None:
        try:
            outcome.append((True, ctx.run(func, *args)))
        except BaseException as exc:  # re-raised in the caller's thread
            outcome.append((False, exc))

    thread = threading.Thread(target=job, name="agent-eval-call", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if ok:
        return value
    raise value
