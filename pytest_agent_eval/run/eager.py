"""A case's run started in the calling thread, outside the event loop, until it needs the loop.

At concurrency 1 most cases (a sync agent, no timeout, one trial) never wait on anything: turning
the event loop for them (a task, two loop iterations, a selector poll) is about a fifth of a fast
case's cost. So the inline runner first steps the run's coroutine itself. Code on that path that
needs the loop (an async agent, a timeout, the traffic layer, several trials) awaits
:func:`needs_loop` first; the rest of the run then goes on as a task on the loop, in the same
context. Public asyncio only: a coroutine's ``send``/``throw``.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

from pytest_agent_eval import compat

T = TypeVar("T")


class _LoopWanted:
    """What a run started outside the loop yields when it needs the loop."""

    def __repr__(self) -> str:
        return "<the event loop wanted>"


LOOP_WANTED = _LoopWanted()


class _NeedsLoop:
    def __await__(self) -> Generator[Any, None, None]:
        if compat.running_loop() is None:  # started outside the loop: hand the rest over to it
            yield LOOP_WANTED


def needs_loop() -> _NeedsLoop:
    """Awaited before anything that needs a running event loop; does nothing where one runs."""
    return _NeedsLoop()


class Suspended(Generic[T]):
    """A run that needs the loop from here on: ``rest()`` is its remainder, to run as a task.

    ``context`` is the context the run started in, in which its remainder goes on; not a copy: a
    context variable set before the hand-over, such as a tool-mock recording's, is reset in it
    after. A plain class, not a dataclass: one fewer class whose methods are compiled at start.
    """

    __slots__ = ("context", "coro", "yielded")

    def __init__(
        self, coro: Coroutine[Any, Any, T], yielded: Any, context: contextvars.Context
    ) -> None:
        self.coro = coro
        self.yielded = yielded
        self.context = context

    async def rest(self) -> T:
        return await _go_on(self.coro, self.yielded, self.context)  # type: ignore[no-any-return]


class Finished(Generic[T]):
    """A run that ended without the loop: ``value`` is its result."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


class OffLoop(Coroutine[Any, Any, T]):
    """A case's run that needs no event loop: it goes on in a worker thread from start to end.

    A sync agent read by a built-in adapter, built-in checks, no timeout, one trial: on the
    background loop such a run costs three hand-overs between threads (to the loop, to a worker for
    the agent, back to the loop), each a wake-up and a fight for the GIL with pytest's own thread;
    in a worker it costs one. ``Loops.submit`` starts it there (with :func:`start`); should it await
    :func:`needs_loop` after all, its rest goes on as a task on the loop. Elsewhere it is the
    coroutine it wraps.
    """

    __slots__ = ("coro",)

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self.coro = coro

    def send(self, value: Any) -> Any:
        return self.coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self.coro.throw(*args)

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self.coro.__await__()


def start(coro: Coroutine[Any, Any, T]) -> Finished[T] | Suspended[T]:
    """Step ``coro`` in this thread until it ends or awaits the loop.

    It runs in a copy of the current context. What it raises comes out of here, as it would from the
    loop.
    """
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration as done:
        return Finished(done.value)
    return Suspended(coro, yielded, context)


@types.coroutine
def _go_on(
    coro: Coroutine[Any, Any, Any], yielded: Any, context: contextvars.Context
) -> Generator[Any, Any, Any]:
    """Continue ``coro`` under a task, each step in ``context``.

    Its first yield (``LOOP_WANTED``) becomes a bare yield (the task steps it again at once); later
    ones, and what the task sends or throws in (cancellation), pass through.
    """
    if yielded is LOOP_WANTED:
        yielded = None
    while True:
        try:
            value, error = (yield yielded), None
        except GeneratorExit:
            context.run(coro.close)
            raise
        except BaseException as exc:
            value, error = None, exc
        try:
            yielded = (
                context.run(coro.throw, error)
                if error is not None
                else context.run(coro.send, value)
            )
        except StopIteration as done:
            return done.value
