"""Request and token budgets for the whole run, through pyrate-limiter (the optional extra ``traffic``).

The bucket is a SQLite file under a file lock in the run's cache directory, so every thread, event loop and
xdist worker of the machine draws on one budget; with a ``redis://`` URL it is a Redis bucket, shared across
machines. Requests wait for the budget; they are never failed for it.

Each attempt takes a permit without waiting (``timeout=0``; pyrate-limiter's ``blocking=False`` hands a bool
to filelock's timeout), stamped with the time it is taken; a request that gets none polls again shortly. The
library's own blocking wait stamps a permit with the time it meant to wake, which a loaded machine overshoots,
letting more requests into a second than the budget.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_UNITS = {"s": 1000, "sec": 1000, "second": 1000, "min": 60_000, "minute": 60_000, "h": 3_600_000, "hour": 3_600_000}
_BUDGET = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)\s*$")


@dataclass(frozen=True)
class Budget:
    """``limit`` per ``interval_ms``, written ``N/s``, ``N/min`` or ``N/h``."""

    limit: int
    interval_ms: int
    text: str

    @classmethod
    def parse(cls, text: str, option: str) -> Budget:
        match = _BUDGET.match(text.lower())
        if not match or match.group(2) not in _UNITS or int(match.group(1)) < 1:
            raise ValueError(f"{option} {text!r}: write the budget as N/s, N/min or N/h, N at least 1 (e.g. 500/min)")
        return cls(int(match.group(1)), _UNITS[match.group(2)], text.strip())

    @property
    def key(self) -> str:
        return f"{self.limit}_per_{self.interval_ms}ms"


def _missing(extra: str, package: str) -> ImportError:
    return ImportError(
        f"the rate limit needs {package}: pip install 'pytest-agent-evalset[{extra}]' (or pip install {package})"
    )


class Limits:
    """The run's request budget and token budget (either may be absent)."""

    def __init__(self, requests: Budget | None, tokens: Budget | None, folder: Path, url: str | None) -> None:
        try:
            import pyrate_limiter  # noqa: F401
        except ImportError:
            raise _missing("traffic", "pyrate-limiter") from None
        self._url = url
        self._folder = folder
        self.requests = self._limiter("requests", requests) if requests else None
        self.tokens = self._limiter("tokens", tokens) if tokens else None
        self._token_cap = tokens.limit if tokens else 0
        shortest = min(b.interval_ms / b.limit for b in (requests, tokens) if b is not None)
        self._pause_s = min(0.05, shortest / 4000)

    def _limiter(self, name: str, budget: Budget) -> Any:
        from pyrate_limiter import Limiter, Rate

        # A window a tenth longer (at most 1 s): a request reaches the server a little after its permit is taken,
        # later on a loaded machine, and the server counts arrivals.
        rates = [Rate(budget.limit, budget.interval_ms + min(budget.interval_ms // 10, 1000))]
        if self._url:
            try:
                from redis import Redis
            except ImportError:
                raise _missing("redis", "redis") from None
            from pyrate_limiter import RedisBucket

            bucket: Any = RedisBucket.init(rates, Redis.from_url(self._url), f"agent_eval:{name}:{budget.key}")
        else:
            try:
                import filelock  # noqa: F401
            except ImportError:
                raise _missing("traffic", "filelock") from None
            from pyrate_limiter import SQLiteBucket

            self._folder.mkdir(parents=True, exist_ok=True)
            path = str(self._folder / f"{name}_{budget.key}.sqlite")
            bucket = SQLiteBucket.init_from_file(rates, table=f"{name}_{budget.key}", db_path=path, use_file_lock=True)
        return Limiter(bucket, buffer_ms=10)

    def _pause(self) -> float:
        return self._pause_s * random.uniform(0.5, 1.5)

    def request(self) -> None:
        """Wait (blocking) until the request budget allows one more request."""
        while self.requests is not None and not self.requests.try_acquire(name="requests", timeout=0):
            time.sleep(self._pause())

    async def request_async(self) -> None:
        while self.requests is not None and not self.requests.try_acquire(name="requests", timeout=0):
            await asyncio.sleep(self._pause())

    def spend(self, tokens: int) -> None:
        """Debit ``tokens`` from the token budget, waiting (blocking) until it has them."""
        weight = min(tokens, self._token_cap)
        while (
            self.tokens is not None
            and weight > 0
            and not self.tokens.try_acquire(name="tokens", weight=weight, timeout=0)
        ):
            time.sleep(self._pause())

    async def spend_async(self, tokens: int) -> None:
        weight = min(tokens, self._token_cap)
        while (
            self.tokens is not None
            and weight > 0
            and not self.tokens.try_acquire(name="tokens", weight=weight, timeout=0)
        ):
            await asyncio.sleep(self._pause())

    def close(self) -> None:
        for limiter in (self.requests, self.tokens):
            if limiter is not None:
                limiter.close()
