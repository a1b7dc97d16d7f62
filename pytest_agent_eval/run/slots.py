"""The concurrency limit, shared by cases on the background loop and cases run in worker threads.

An ``asyncio.Semaphore`` belongs to one loop: a case run in a worker thread from start to end (it
needs no loop, see ``Loops.submit``) could not take it. ``Slots`` is the same limit for both: a task
on a loop waits for a slot without blocking the loop, a thread outside any loop waits in place.
Waiters get their slot in the order they asked, whichever kind they are. Pure stdlib.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import TYPE_CHECKING

from pytest_agent_eval import compat

if TYPE_CHECKING:
    import asyncio
    from types import TracebackType


class _Waiter:
    """One wait for a slot: on a loop (``future``) or in a thread outside any loop (``lock``)."""

    __slots__ = ("future", "granted", "lock", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self.granted = False
        """The slot is its own (set under the slots' lock): it gives it back if it stops waiting."""
        self.future: asyncio.Future[None] | None = None
        self.lock: threading.Lock | None = None
        if loop is None:
            self.lock = threading.Lock()
            self.lock.acquire()  # released when the slot is handed over
        else:
            self.future = loop.create_future()

    def wake(self) -> None:
        if self.lock is not None:
            self.lock.release()
            return
        assert self.loop is not None and self.future is not None
        if compat.running_loop() is self.loop:
            _settle(self.future)
            return
        with contextlib.suppress(RuntimeError):  # its loop was closed: nobody waits there any more
            self.loop.call_soon_threadsafe(_settle, self.future)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Slots:
    """At most ``limit`` holders at once, from tasks on any loop and from plain threads.

    Used as ``async with slots:``. Thread-safe; first come, first served.
    """

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._lock = threading.Lock()
        self._waiters: collections.deque[_Waiter] = collections.deque()

    async def __aenter__(self) -> None:
        with self._lock:
            if self._free > 0:
                self._free -= 1
                return
            waiter = _Waiter(compat.running_loop())
            self._waiters.append(waiter)
        if waiter.lock is not None:  # a thread outside any loop: no task to suspend, it waits here
            waiter.lock.acquire()
            return
        assert waiter.future is not None
        try:
            await waiter.future
        except BaseException:  # cancelled while waiting: its place, or the slot it got, goes on
            with self._lock:
                handed = waiter.granted
                if not handed:
                    self._waiters.remove(waiter)
            if handed:
                self.release()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def release(self) -> None:
        """Give a slot back: to the first waiter, if any."""
        with self._lock:
            if not self._waiters:
                self._free += 1
                return
            waiter = self._waiters.popleft()
            waiter.granted = True
        waiter.wake()
