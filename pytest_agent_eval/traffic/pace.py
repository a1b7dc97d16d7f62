"""One pace for the whole run (SPEC §14 "The provider's budget"), from one shared store.

Every request of the run takes its permit from one shared store (``store``), so that the written
budget is reached and never exceeded, a 429's cool-down slows every thread, loop and xdist worker,
and, with no budget written, the pace the provider announces in its headers is kept.

Until a host's first answer, a process sends it one request at a time (the others wait on a future,
costing no CPU): that answer's ``x-ratelimit-*`` / ``anthropic-ratelimit-*`` headers give its rate
before a burst can overrun it. A host that announces no rate is paced by its 429s alone: a 429
halves the pace (from what the run was sending) unless its request was sent before the last halving
(a burst of 429s halves it once), each answer after it raises the pace a little (AIMD).
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_agent_eval.traffic.limits import Budget
from pytest_agent_eval.traffic.store import Op, Store, StoreError

T = TypeVar("T")
FREE_S = 0.1
"""How long a host that nothing paces goes without asking the store (see ``Pace._permit``)."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@dataclass(frozen=True)
class Announced:
    """The rates a provider's headers announce (per second), ``None`` where they say nothing."""

    requests: float | None
    tokens: float | None


def seconds_until(text: str) -> float | None:
    """A wait as written in rate-limit headers, in seconds.

    OpenAI's ``6m0s`` / ``20ms`` / ``1.5s``, Anthropic's RFC 3339 time, or plain seconds; ``None``
    if unreadable.
    """
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        from datetime import datetime

        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    try:
        return max(when.timestamp() - time.time(), 0.0)
    except (OverflowError, ValueError, OSError):  # a date no clock reaches
        return None


def _rate(headers: Any, limit: str, remaining: str, reset: str) -> float | None:
    """The refill rate of the provider's bucket.

    What is used up over the time it takes to refill it.
    """
    try:
        cap, left = float(headers[limit]), float(headers[remaining])
    except (KeyError, TypeError, ValueError):
        return None
    refill = seconds_until(str(headers.get(reset) or ""))
    if (
        refill is None
        or refill <= 0
        or not (math.isfinite(cap) and math.isfinite(left))
        or left >= cap
    ):
        return None
    rate = (cap - left) / refill
    return rate if math.isfinite(rate) and rate > 0 else None


def announced(headers: Any) -> Announced:
    """The request and token rates announced in an answer's headers.

    OpenAI's ``x-ratelimit-*`` or Anthropic's ``anthropic-ratelimit-*`` headers.
    """
    requests = _rate(
        headers,
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
    ) or _rate(
        headers,
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    )
    tokens = _rate(
        headers,
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
    ) or (
        _rate(
            headers,
            "anthropic-ratelimit-tokens-limit",
            "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset",
        )
    )
    return Announced(requests, tokens)


class Pace:
    """The run's pace for this process: its gates, and its permits from the shared ``store``."""

    def __init__(
        self, store: Store, requests: Budget | None = None, tokens: Budget | None = None
    ) -> None:
        self.store = store
        self._tstep = tokens.step_s if tokens else 0.0
        step = requests.step_s if requests else 0.0
        store.update(
            [("set", "step", step), ("set", "tstep", self._tstep)]
        )  # StoreError: the run cannot start
        self.failed: str | None = None
        """Why the store failed mid-run (``StoreError``): every later request fails at once, saying
        so.
        """
        self._lock = threading.Lock()
        self._gates: dict[str, Future[None]] = {}
        self._host_tstep: dict[str, float] = {}
        self._announcing: set[str] = set()
        self._slowed: set[str] = set()
        self._free: dict[str, float] = {}
        """Host -> until when (``time.monotonic``) its requests need no permit: the store said
        nothing paces it.
        """
        self._sent: dict[str, int] = {}
        self._estimate = 0.0
        """Tokens per request, a moving mean: what a permit reserves of a token budget before the
        answer says.
        """

    # -- before a request
    # ------------------------------------------------------------------------------------

    def _gate(self, host: str) -> tuple[Future[None] | None, bool]:
        """``(future to wait for, whether this request is the host's first)``."""
        with self._lock:
            gate = self._gates.get(host)
            if gate is None:
                self._gates[host] = Future()
                return None, True
            return (None if gate.done() else gate), False

    def wait(self, host: str) -> bool:
        """Wait (blocking) for this request's permit.

        Returns whether it is the host's first request (see ``answered``). ``StoreError`` when the
        store failed: the request is not sent.
        """
        gate, first = self._gate(host)
        if gate is not None:
            gate.result()
        delay = self._first_permit(host, first)
        while delay > 0:  # paced, not due: wait, then until a step after the last one sent
            time.sleep(delay)
            delay = self._send(host, first)
        return first

    async def wait_async(self, host: str) -> bool:
        import asyncio  # loaded: a coroutine runs on its loop (the controller imports none)

        gate, first = self._gate(host)
        if gate is not None:
            await asyncio.wrap_future(gate)
        delay = self._first_permit(host, first)
        while delay > 0:
            await asyncio.sleep(delay)
            delay = self._send(host, first)
        return first

    def _first_permit(self, host: str, first: bool) -> float:
        """``_permit``, for the host's first request too.

        The host's first request whose permit failed lets the others go (to fail as it did).
        """
        try:
            return self._permit(host)
        except StoreError:
            if first:
                self.open(host)
            raise

    def _send(self, host: str, first: bool) -> float:
        """``store.send``: 0 once the request may go, else the seconds to wait before asking again.

        The host's first request whose store call failed lets the others go (to fail as it did).
        """
        try:
            return self._ask(lambda: self.store.send(host))
        except StoreError:
            if first:
                self.open(host)
            raise

    def _ask(self, call: Callable[[], T]) -> T:
        """A store call.

        Once one failed (``StoreError``), every later one fails at once with its reason.
        """
        if self.failed is not None:
            raise StoreError(self.failed)
        try:
            return call()
        except StoreError as exc:
            self.failed = str(exc)
            raise

    def _permit(self, host: str) -> float:
        """Seconds to wait for this request's permit (``Store.reserve``); -1: nothing paces it.

        A host nothing paces goes without the store for ``FREE_S`` (no lock per request at high
        rates): a 429 seen here ends that at once, one seen by another worker within ``FREE_S``.
        """
        with self._lock:
            self._sent[host] = self._sent.get(host, 0) + 1
            if time.monotonic() < self._free.get(host, 0.0):
                return -1.0
            sent, self._sent[host] = self._sent[host], 0
        estimate = self._estimate
        delay = self._ask(lambda: self.store.reserve(host, estimate, sent))
        if delay < 0:
            with self._lock:
                self._free[host] = time.monotonic() + FREE_S
        return delay

    # -- after it
    # --------------------------------------------------------------------------------------------

    def open(self, host: str) -> None:
        """The host's first request is over (answered or failed): the others may go."""
        with self._lock:
            gate = self._gates.get(host)
        if gate is not None and not gate.done():
            with contextlib.suppress(InvalidStateError):  # set by another thread meanwhile
                gate.set_result(None)

    def heard(
        self, host: str, status: int, headers: Any, cool_s: float | None, age_s: float = 0.0
    ) -> None:
        """Learn from an answer's status and headers (before its body).

        The announced rates, a 429's cool-down. ``age_s``: how long ago its request was sent (a 429
        to a request sent before the last slow-down is old news).
        """
        ops: list[Op] = []
        rates = announced(headers)
        if status == 429 or rates.requests or rates.tokens:
            with self._lock:
                self._free.pop(host, None)
        if rates.requests:
            ops.append(("set", f"step:{host}", 1.0 / rates.requests))
            self._announcing.add(host)
        if rates.tokens:
            self._host_tstep[host] = 1.0 / rates.tokens
            ops.append(("set", f"tstep:{host}", self._host_tstep[host]))
        if status == 429:
            if cool_s:
                ops.append(("cool", f"cool:{host}", cool_s))
            if not rates.requests:  # the rate it announced (if any) was too fast for it: slower
                ops.append(("slower", f"step:{host}", age_s))
                self._slowed.add(host)
        elif status < 400 and host in self._slowed and host not in self._announcing:
            ops.append(("faster", f"step:{host}", 1.0))
        if ops:
            self._ask(lambda: self.store.update(ops))

    def spent(self, host: str, tokens: int) -> None:
        """An answer's tokens.

        The permit reserved the estimate, the rest is debited (or the excess credited).
        """
        ops: list[Op] = []
        surprise = tokens - self._estimate
        if self._tstep:
            ops.append(("add", "ttat", surprise * self._tstep))
        if self._host_tstep.get(host):
            ops.append(("add", f"ttat:{host}", surprise * self._host_tstep[host]))
        self._estimate = tokens if not self._estimate else 0.8 * self._estimate + 0.2 * tokens
        if ops:
            self._ask(lambda: self.store.update(ops))

    def close(self) -> None:
        self.store.close()
