"""Timing the steps of async agents, to tell which one blocks the event loop and for how long.

An async agent that blocks the event loop (``time.sleep`` in an ``async def``, a busy loop) stalls
every case on it, and no timeout on the loop can fire. Each step of an async agent is timed here, so
that

* a call whose step ran longer than the case's timeout fails ("agent blocked the event loop for X
  s"), and
* while the loop is blocked, the thread that waits for a case can tell which case blocks it and for
  how long.
"""

from __future__ import annotations

import contextvars
import threading
import time
import types
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case


class Step(NamedTuple):
    """A step of an async agent running now on some thread's event loop."""

    case: Case | None
    """``None``: an agent called outside a case."""
    started: float


class LoopBlocked(Exception):
    """The agent held the event loop (one step, no ``await``) longer than the case's timeout."""


CALL: contextvars.ContextVar[tuple[Case | None, float | None]] = contextvars.ContextVar(
    "agent_eval_call"
)
"""The running case and its per-call timeout, set where the case starts."""

_RUNNING: dict[int, Step] = {}
"""By thread: the agent step its event loop runs now."""


def running_step(thread: threading.Thread) -> Step | None:
    """The agent step the event loop in ``thread`` runs now, if one does."""
    return _RUNNING.get(thread.ident or 0)


@types.coroutine
def timed_steps(awaitable: Awaitable[Any]) -> Generator[Any, Any, Any]:
    """Await ``awaitable`` step by step, noting each step.

    Fail when a step outlasts the case's timeout.
    """
    case, timeout = CALL.get((None, None))
    me = threading.get_ident()
    steps = awaitable.__await__()
    longest = 0.0
    value: Any = None
    error: BaseException | None = None
    while True:
        step = _RUNNING[me] = Step(case, time.monotonic())
        try:
            yielded = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            result = done.value
            break
        finally:
            _RUNNING.pop(me, None)
            longest = max(longest, time.monotonic() - step.started)
        try:
            value, error = (yield yielded), None
        except (
            BaseException
        ) as exc:  # thrown into this coroutine (cancellation): handed on to the agent
            value, error = None, exc
    if case is not None and timeout is not None and longest > timeout:
        raise LoopBlocked(blocked_message(case, longest, timeout))
    return result


def blocked_message(
    case: Case, seconds: float, timeout: float | None, ongoing: bool = False
) -> str:
    """The message ``agent blocked the event loop for X s``.

    ``ongoing``: it still does (seen from outside the loop).
    """
    limit = f" (timeout of case {case.id}: {timeout:g} s)" if timeout is not None else ""
    return (
        f"agent blocked the event loop for {'more than ' if ongoing else ''}{seconds:.1f} s{limit}"
    )


class Stall(NamedTuple):
    """The event loop did not turn for ``seconds``, held by ``culprit``'s agent.

    A ``None`` culprit: held by something else.
    """

    seconds: float
    culprit: Case | None
