"""The run's known spend (SPEC §25 "Spend cap"), shared by every xdist worker and machine.

Shared as the pace is (SPEC §18): a number in the run's own file under a file lock in the run's
cache directory, or in a Redis hash when the rate limit's Redis store is given
(``--agent-eval-rate-limit-url``). Each run has its own key, handed from the xdist controller to its
workers, so two runs never add to one spend.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol

from pytest_agent_eval.traffic.store import FileStore, RedisStore, require_redis

KEEP_S = 7 * 24 * 3600
"""How long Redis keeps a run's spend after its last change (a run never takes this long)."""


class Tally(Protocol):
    def add(self, cost: float) -> None:
        """Add ``cost`` (USD) to the run's spend; ``StoreError`` when the store cannot be used."""
        ...

    def total(self) -> float:
        """The run's spend so far; ``StoreError`` when the store cannot be used."""
        ...

    def close(self) -> None: ...


class FileTally(FileStore):
    """The spend in the run's own JSON file.

    Never forgotten while the run lasts: a case may take long.
    """

    forget_s = math.inf

    def add(self, cost: float) -> None:
        self.update([("add", "spent", cost)])

    def total(self) -> float:
        with self._state() as (state, _):
            return state.get("spent", 0.0)


class RedisTally(RedisStore):
    """The spend in a Redis hash, its key kept for ``KEEP_S`` after the last change."""

    def add(self, cost: float) -> None:
        def add() -> None:
            pipe = self._client.pipeline()
            pipe.hincrbyfloat(self._key, "spent", cost)
            pipe.expire(self._key, KEEP_S)
            pipe.execute()

        self._call(add)

    def total(self) -> float:
        value = self._call(lambda: self._client.hget(self._key, "spent"))
        return float(value) if value is not None else 0.0


def open_tally(folder: Path, url: str | None, key: str) -> Tally:
    """The run's spend tally: Redis when a URL is given, else a file.

    ``redis`` is imported only then; the file is ``folder/spend_<key>.json``.
    """
    if url:
        require_redis("the spend cap's Redis store")
        return RedisTally(url, f"agent_eval:spend:{key}")
    return FileTally(folder / f"spend_{key}.json")
