"""Which trial's recording a tool call belongs to.

Two process-wide pieces of state, both needed because a stand-in is called by the agent's code with
no handle to the running case:

* ``_CURRENT``, a context variable: the recording of the trial whose code runs (set for one trial by
  ``MockPlan.record``), or ``_PASSTHROUGH`` while a real tool runs. Concurrent trials and cases each
  see their own; sync agents run in threads that copy the context.
* ``_ACTIVE``: the recordings in progress, only for code that lost the context (a bare
  ``threading.Thread`` started by the agent): with exactly one case running, its calls still count.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, Protocol

from pytest_agent_eval.core.tool_errors import UnmockedToolError


class Answering(Protocol):
    """What a stand-in asks of the running trial's recording (``mocks.recording.Recording``).

    Answer a call of tool ``name`` with ``args`` and record it; ``real`` runs the real tool when the
    call passes through.
    """

    def handle(self, name: str, args: dict[str, Any], real: Callable[[], Any]) -> Any: ...

    async def ahandle(
        self,
        name: str,
        args: dict[str, Any],
        real: Callable[[], Awaitable[Any]],
        server: str | None = None,
        standin: bool = False,
    ) -> Any: ...

    def patched(self, target: str) -> bool:
        """Whether the trial's case patched ``target`` (``module:attr``).

        If so, its stand-in answers it.
        """
        ...


_PASSTHROUGH: Final = "passthrough"
_CURRENT: contextvars.ContextVar[Answering | str | None] = contextvars.ContextVar(
    "agent_eval_recording", default=None
)


class _Active:
    """The recordings in progress, for code that lost its context."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recordings: dict[int, Answering] = {}
        """By ``id``, in the order they began: a recording (a dataclass) is removed as itself, not
        by comparing it with each one in progress.
        """

    def add(self, recording: Answering) -> None:
        with self._lock:
            self._recordings[id(recording)] = recording

    def remove(self, recording: Answering) -> None:
        with self._lock:
            del self._recordings[id(recording)]

    def snapshot(self) -> list[Answering]:
        with self._lock:
            return list(self._recordings.values())


_ACTIVE = _Active()


class current:
    """``recording`` is current for the code run inside the block (one trial).

    A class, not a generator: it is entered for every trial of every case.
    """

    __slots__ = ("recording", "token")

    def __init__(self, recording: Answering) -> None:
        self.recording = recording

    def __enter__(self) -> None:
        self.token = _CURRENT.set(self.recording)
        _ACTIVE.add(self.recording)

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self.token)
        _ACTIVE.remove(self.recording)


@contextlib.contextmanager
def passing_through() -> Iterator[None]:
    """A real tool runs: stand-ins it calls in turn are not mocked or recorded again."""
    token = _CURRENT.set(_PASSTHROUGH)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_recording(tool: str = "a tool") -> Answering | None:
    """The recording of the trial this code runs for.

    ``None`` outside a running case (the real tool runs).

    Code that lost the context (a thread started without copying it) gets the one recording in
    progress; with several in progress it cannot be told which case it belongs to, and the call
    raises rather than reach the real tool.
    """
    recording = _CURRENT.get()
    if recording == _PASSTHROUGH:
        return None
    if recording is not None:
        return recording  # type: ignore[return-value]
    active = _ACTIVE.snapshot()
    if len(active) > 1:
        raise UnmockedToolError(
            f"{tool} was called from a thread that did not inherit the eval case's context while "
            f"{len(active)} cases run; "
            "start threads with contextvars.copy_context().run(...) or use "
            "asyncio.to_thread / loop.run_in_executor with a copied context"
        )
    return active[0] if active else None
