"""SIGTERM ends the run as Ctrl-C does.

SIGTERM is how CI, ``timeout`` and Kubernetes stop a job. It raises ``KeyboardInterrupt`` in the
main thread, so every report is written with what finished and says the run was interrupted (exit
status 2).

Installed for the session only when SIGTERM has its default action (a handler of the user's or of
another plugin is left alone), and put back when the session ends.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

_installed: list[bool] = []
"""Set while this module's handler is installed (one session at a time per process)."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def install() -> None:
    """SIGTERM raises ``KeyboardInterrupt`` while the session runs.

    Main thread, default action only.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    signal.signal(signal.SIGTERM, _interrupt)
    _installed.append(True)


def restore() -> None:
    """SIGTERM's default action back.

    When this module installed its handler and it is still the one set.
    """
    if not _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed.clear()
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
