"""The running trial's context: which case and trial is running, and the conversation it continues.

Set by the runner for each trial; read by adapters (an HTTP agent's session id, a framework's own message list)
and by the traffic hook (which case a request belongs to). Context variables, so concurrent trials each see
their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

TRIAL: ContextVar[tuple[str, int] | None] = ContextVar("agent_eval_trial_id", default=None)
"""The running case's id and trial number, set by the runner for each trial: for adapters that keep state per
case and trial (an HTTP agent's session id)."""

CONVERSATION: ContextVar[Any] = ContextVar("agent_eval_conversation", default=None)
"""During an agent call of a conversation: the ``RunRecord.conversation`` that ``normalise`` read from the
previous call's result (a framework's own message list), to be continued; ``None`` for the first message and
single calls."""


async def in_waves(more: Callable[[list[T]], int], run: Callable[[int], Awaitable[T]]) -> list[T]:
    """Trials in waves, each wave's concurrently: ``more(done)`` says how many to start next (0: done)."""
    done: list[T] = []
    while (count := more(done)) > 0:
        start = len(done)
        done += await asyncio.gather(*(run(n) for n in range(start, start + count)))
    return done
