"""Which case and trial an HTTP request belongs to: a context variable set while a trial runs.

asyncio tasks and the runner's worker threads copy the context, so a request is attributed to the
trial that made it under any concurrency.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agent_eval.traffic.cassette import Cassette, CassetteError
from pytest_agent_eval.traffic.usage import CallUsage, Prices, Usage

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import RunRecord


@dataclass
class SeenCall:
    """One LLM request of a trial as its chat span tells it (SPEC §23).

    Kept only when the run traces.
    """

    start_ns: int
    end_ns: int
    model: str | None = None
    usage: CallUsage | None = None
    cost: float | None = None
    """In USD; ``None`` when the model has no price or the usage is unknown."""
    response_id: str | None = None
    provider: str | None = None
    """The host the request went to (``api.openai.com``), as ``gen_ai.provider.name`` cannot be told
    for sure.
    """
    error: str | None = None


@dataclass
class CaseTraffic:
    """One case's cassette (when recording or replaying) and its trials."""

    case_id: str
    cassette: Cassette | None
    cassette_name: str = ""
    """The cassette's path as error messages show it."""
    mode: str | None = None
    """``record``, ``new`` or ``replay`` (``--agent-eval-record``/``--agent-eval-replay``): for
    traffic recorded above HTTP (an MCP session's, ``mocks.mcp``).
    """
    trials: list[TrialTraffic] = field(default_factory=list)
    keep_calls: bool = False
    """Keep each request of its trials (``TrialTraffic.calls``): the run traces."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def trial(self) -> TrialTraffic:
        with self._lock:
            trial = TrialTraffic(self, len(self.trials) + 1, calls=[] if self.keep_calls else None)
            self.trials.append(trial)
            return trial

    @property
    def failed(self) -> bool:
        return any(t.infra_error for t in self.trials)


@dataclass
class TrialTraffic:
    """What one trial's requests cost, and its infrastructure failures."""

    case: CaseTraffic
    number: int
    usage: Usage = field(default_factory=Usage)
    calls: list[SeenCall] | None = None
    """Each request answered, when the run traces (``None`` otherwise: nothing kept)."""
    _failures: list[tuple[str | None, str]] = field(default_factory=list)
    waiting_for: str | None = None
    """What the trial's request is waiting for (the run's rate limit, a 429's ``Retry-After``);
    still set when the wait did not end by itself (the case's timeout cancelled it): the timeout is
    then infrastructure's.
    """
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def infra_error(self) -> str | None:
        """The first infrastructure failure the agent did not get past (the one reported)."""
        return self._failures[0][1] if self._failures else None

    @contextlib.contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """Note that the trial waits for ``what`` while the block runs.

        Kept when the block is cancelled.
        """
        self.waiting_for = what
        yield
        self.waiting_for = None

    def fail(self, message: str, key: str | None = None) -> None:
        """Note an infrastructure failure.

        One with a ``key`` (the request) is forgotten when the same request is later answered
        (``answered``): the client's own retry got the agent its answer.
        """
        with self._lock:
            self._failures.append((key, message))

    def answered(self, key: str) -> None:
        with self._lock:
            if self._failures:
                self._failures = [(k, m) for k, m in self._failures if k is None or k != key]

    def report(self, run: RunRecord) -> str | None:
        """The trial's usage into its run record; the infrastructure failure under it, if any.

        Usage is requests; tokens and cost when every response reported them. The runner decides
        what it makes of the trial.
        """
        if self.usage.requests:
            run.usage = (
                {**run.usage, **self.usage.as_dict()} if self.usage.measured else {**run.usage}
            )
            run.usage["requests"] = self.usage.requests
        if self.infra_error is None and self.waiting_for is not None and run.timed_out:
            # the budget or a Retry-After held it up
            return f"{run.error} while waiting for {self.waiting_for}"
        return self.infra_error

    def count(self, call: CallUsage | None, prices: Prices, seen: SeenCall | None = None) -> None:
        """Count one answered request; ``seen``: its chat span's facts, kept when the run traces."""
        with self._lock:
            self.usage.requests += 1
            if call is not None:
                self.usage.add(call, prices)
            if seen is not None and self.calls is not None:
                seen.usage = call
                if call is not None and call.unreadable is None:
                    cost = prices.cost(call)
                    seen.cost = cost if isinstance(cost, float) else None
                self.calls.append(seen)


CURRENT: ContextVar[TrialTraffic | None] = ContextVar("agent_eval_trial", default=None)


def relative_path(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it is below it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def cassette_error_text(exc: CassetteError, root: Path) -> str:
    """A cassette's error with its path relative to the rootdir ``root``."""
    text = str(exc)
    prefix = f"{root}{os.sep}"
    return text[len(prefix) :] if text.startswith(prefix) else text
