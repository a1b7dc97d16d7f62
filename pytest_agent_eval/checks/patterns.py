"""``re.search`` with a time bound, for the patterns of eval files.

A pattern with catastrophic backtracking (``(a+)+$`` on ``"aaaa…ab"``) can run for hours, and ``re``
holds the GIL while it matches: no thread, no watchdog and no timeout of the process can run
meanwhile, and a thread cannot be stopped. So a pattern that repeats anything is matched in a helper
process, which is killed at the deadline; a pattern without repetition cannot backtrack and is
matched here.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import queue
import re
import subprocess
import sys
import threading
from typing import ClassVar

from pytest_agent_eval.checks.base import CheckError

DEFAULT_LIMIT = 10.0
"""Seconds a search may take when its case sets no timeout."""

_REPEATS = re.compile(r"[*+?{]")
_HELPER = """
import json, re, sys
for line in sys.stdin:
    pattern, text, flags = json.loads(line)
    m = re.search(pattern, text, flags)
    sys.stdout.write(json.dumps(None if m is None else [m.start(), m.end()]) + "\\n")
    sys.stdout.flush()
"""


class PatternTimeout(CheckError):
    """The search did not finish within its time limit: the check has no verdict.

    The pattern backtracks catastrophically on this text.
    """


class Found:
    """Where the pattern matched, as much of ``re.Match`` as the checks read."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.start, self.end = text, start, end

    def group(self, index: int = 0) -> str:
        return self.text[self.start : self.end]


def search(pattern: str, text: str, flags: int = 0, limit: float | None = None) -> Found | None:
    """``re.search(pattern, text, flags)``; :class:`PatternTimeout` after ``limit`` seconds.

    ``limit`` defaults to 10.
    """
    compiled = _compile(pattern, flags)  # a bad pattern raises re.error here, as re.search would
    if not _REPEATS.search(pattern):
        m = compiled.search(text)
        return None if m is None else Found(text, m.start(), m.end())
    helper = _Helper.take()
    span = helper.search(pattern, text, flags, DEFAULT_LIMIT if limit is None else limit)
    return None if span is None else Found(text, *span)


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


class _Helper:
    """A Python process that runs searches sent to it, one at a time.

    It is killed when one takes too long.
    """

    _idle: ClassVar[list[_Helper]] = []
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _HELPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._answers: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, name="agent-eval-regex", daemon=True).start()

    @classmethod
    def take(cls) -> _Helper:
        with cls._lock:
            return cls._idle.pop() if cls._idle else cls()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._answers.put(line)
        self._answers.put("")  # the process ended

    def search(self, pattern: str, text: str, flags: int, limit: float) -> tuple[int, int] | None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps([pattern, text, flags]) + "\n")
            self._proc.stdin.flush()
            answer = self._answers.get(timeout=limit)
        except queue.Empty:
            self._kill()
            raise PatternTimeout(
                f"did not finish within {limit:g} s: the pattern /{pattern}/ "
                "backtracks catastrophically on this output"
            ) from None
        except OSError as exc:
            self._kill()
            raise PatternTimeout(f"could not be run: {exc}") from None
        if not answer:
            self._kill()
            raise PatternTimeout("could not be run: its helper process ended")
        with self._lock:
            self._idle.append(self)
        span = json.loads(answer)
        return None if span is None else (span[0], span[1])

    @classmethod
    def close_all(cls) -> None:
        """End the idle helpers (at exit): their input closes and they finish."""
        with cls._lock:
            helpers, cls._idle[:] = list(cls._idle), []
        for helper in helpers:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                assert helper._proc.stdin is not None
                helper._proc.stdin.close()
                helper._proc.wait(timeout=5)

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.kill()
            self._proc.wait(timeout=5)


atexit.register(_Helper.close_all)
