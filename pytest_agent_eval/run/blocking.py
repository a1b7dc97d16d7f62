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

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that thread is reserved for this job
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name="agent-eval-call", daemon=True).start()

    def _work(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


_WORKERS = _Workers()


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
