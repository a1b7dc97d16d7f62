"""Exceptions from agent code that asyncio cannot carry, made into ordinary ones.

Each such exception fails its own case.

``SystemExit`` would stop the event loop that runs every case; ``StopIteration`` cannot be set on a
future or leave a coroutine (it becomes a ``RuntimeError``, or hangs the awaiting task). A
``KeyboardInterrupt`` from an agent interrupts the run, as Ctrl-C does.
"""

from __future__ import annotations

import _thread
import sys
import threading


class Escaped(Exception):
    """A ``BaseException`` or ``StopIteration`` raised by agent code, carried as an ordinary one."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(describe(original))
        self.original = original


def escape(exc: BaseException) -> BaseException:
    """``exc`` as something a future and a coroutine can carry.

    An :class:`Escaped` when it must be.
    """
    # asyncio's cancellation, when asyncio is loaded (a run that never needed a loop loads none)
    asyncio = sys.modules.get("asyncio")
    cancelled = asyncio.CancelledError if asyncio is not None else Escaped
    if isinstance(exc, (cancelled, Escaped)):
        return exc  # cancellation of the call itself, or carried already
    if isinstance(exc, (StopIteration, StopAsyncIteration, SystemExit, KeyboardInterrupt)):
        return Escaped(exc)
    # other exceptions as they are (pytest's own outcomes, e.g. pytest-timeout's, among them)
    return exc


def original(exc: BaseException) -> BaseException:
    """What the agent raised.

    The carried exception, or the ``StopIteration`` a coroutine turned into an error.
    """
    if isinstance(exc, Escaped):
        return exc.original
    cause = exc.__cause__
    pep479 = isinstance(exc, RuntimeError) and isinstance(
        cause, (StopIteration, StopAsyncIteration)
    )
    if pep479 and str(exc).endswith(
        f"raised {type(cause).__name__}"
    ):  # "coroutine raised StopIteration"
        return cause  # type: ignore[return-value]
    return exc


def describe(exc: BaseException) -> str:
    """``Type: message`` of what the agent raised; ``sys.exit(3)`` for a ``SystemExit``."""
    exc = original(exc)
    if isinstance(exc, SystemExit):
        return f"sys.exit({'' if exc.code is None else repr(exc.code)})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def interrupt(exc: BaseException) -> None:
    """Interrupt the run when the agent raised ``KeyboardInterrupt``.

    Raised here in the main thread, else delivered to the main thread as Ctrl-C would be (and this
    call fails its case).
    """
    agents = original(exc)
    if not isinstance(agents, KeyboardInterrupt):
        return
    if threading.current_thread() is threading.main_thread():
        raise agents
    with _INTERRUPT:
        if _INTERRUPTED:  # once: a second Ctrl-C would stop pytest while it reports the first
            return
        _INTERRUPTED.append(True)
    _thread.interrupt_main()


_INTERRUPT = threading.Lock()
_INTERRUPTED: list[bool] = []
