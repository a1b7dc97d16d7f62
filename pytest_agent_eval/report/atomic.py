"""Writing a report file so that a reader never sees half of it.

A temporary file beside it, then a rename.

A report path that is a symlink is written through (its target is replaced, the link stays); a FIFO
or a character device (``/dev/stdout``, ``/dev/null``) is written to as it is, never replaced by a
file; anything else that is not a regular file is refused. A report that cannot be written is one
line on the terminal (:func:`write_report`): the other reports are still written and the run's exit
status is left as it is.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


class ReportPathError(OSError):
    """A report path that cannot take a report (a folder, a socket, a FIFO nobody reads).

    The message says which.
    """


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``.

    Also on Ctrl-C the old file, or none, stays whole. A symlink's target is written; a FIFO or
    character device is written through.
    """
    target = Path(os.path.realpath(path))
    if _write_special(path, target, text, append=False):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # as open() would create it (mkstemp makes it private)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` in one write.

    A CI job summary file may be shared with other steps.
    """
    target = Path(os.path.realpath(path))
    if _write_special(path, target, text, append=True):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8", errors="replace") as f:
        f.write(text)


def _write_special(path: Path, target: Path, text: str, append: bool) -> bool:
    """Write ``text`` through to ``target`` when it is a FIFO or a character device (``True``).

    ``False`` for a regular file or none; ``ReportPathError`` for anything else.
    """
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISREG(mode):
        return False
    if stat.S_ISDIR(mode):
        raise ReportPathError(f"{path} is a folder")
    if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise ReportPathError(f"{path} is not a regular file, a FIFO or a character device")
    try:  # without blocking: a FIFO that no one reads would hang the run's end
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | (os.O_APPEND if append else 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise ReportPathError(f"{path} is a FIFO that no process reads") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
    return True


def write_report(config: pytest.Config, what: str, path: Path, write: Callable[[], None]) -> bool:
    """Run ``write`` (which writes the report ``what`` to ``path``); say so in one line if it fails.

    Then return ``False``: the run goes on to write its other reports, its exit status unchanged.
    """
    try:
        write()
    except OSError as exc:
        why = str(exc) if isinstance(exc, ReportPathError) else f"{path}: {exc.strerror or exc}"
        tell(config, f"{what} not written: {why}")
        return False
    return True


def tell(config: pytest.Config, line: str) -> None:
    """``line`` on the terminal (standard error when there is no terminal reporter, e.g.

    ``-p no:terminal``).
    """
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line, yellow=True, bold=True)
    else:
        print(line, file=sys.stderr)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
