"""Keeping the cyclic garbage collector off a large run's long-lived objects.

Its passes over them are for nothing.

A run of 10,000 cases keeps hundreds of thousands of objects alive until it ends (items, reports,
records). The cyclic GC scans them over and over while they are made and while the cases run, and
once more, object by object, as the interpreter tears them down at exit; it finds nothing to free
any of these times.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator

FREEZE_FROM = 1000
"""Eval items from which a session freezes what is alive after collection: the collection before the
freeze goes over the whole process, which costs more than the freeze saves for a few cases (and, in
a process that runs many small sessions, as a test suite's in-process runs do, it would cost every
one of them).
"""

_at_exit = False
_frozen_by: object | None = None


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection while a file's items are made.

    Reference counting still frees what it can.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def no_sweep_at_exit() -> None:
    """At interpreter exit, collect garbage once and leave what is alive to the process's end.

    Leaving it spares the collector's passes over it while modules are torn down (1.1 s of a
    10,000-case run's 8 s).

    Garbage cycles are collected first, so their finalizers run; objects that are still reachable
    then (the session's items and reports) are freed by reference counting where they can be and
    otherwise left. Registered once per process, and only by a run that collected eval files: a run
    without any pays nothing.
    """
    global _at_exit
    if not _at_exit:
        _at_exit = True
        atexit.register(_collect_then_freeze)


def _collect_then_freeze() -> None:
    gc.collect()
    gc.freeze()


def freeze_collected(owner: object, items: int) -> None:
    """Move every object alive now out of the collector's reach while the cases run.

    The collected items first of all. Done for a session of ``FREEZE_FROM`` eval items or more,
    unless something froze objects before (an outer pytest session in this process, the user).

    Garbage is collected first, so that only live objects are frozen: what tells liveness by weak
    references (the tool stand-ins still alive, ``mocks.standins``) must not see a dead object kept
    frozen.
    """
    global _frozen_by
    if items >= FREEZE_FROM and _frozen_by is None and gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        _frozen_by = owner


def unfreeze(owner: object) -> None:
    """Give back what ``freeze_collected(owner)`` froze, at the end of ``owner``'s session.

    Objects that turned into garbage meanwhile are freed by the next collection.
    """
    global _frozen_by
    if _frozen_by is owner:
        _frozen_by = None
        gc.unfreeze()
