"""The traffic hook's options as one value: read by the plugin layer, used by :mod:`.session`."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class TrafficOptions(NamedTuple):
    """The options of the HTTP traffic hook; ``on`` when any of them needs it."""

    on: bool = False
    record: str | None = None
    """``record`` (everything anew), ``new`` (only what is missing), ``replay``, or ``None``."""
    retries: int = 3
    rate_limit: str | None = None
    token_limit: str | None = None
    rate_limit_url: str | None = None
    cassettes: Path | None = None
    match_ignore: tuple[str, ...] = ()
    prices: str = ""
    keep_calls: bool = False
    """A trace option (``--agent-eval-traces``/``--agent-eval-otlp``): each request kept for its
    chat span.
    """
    pace: bool = True
    """One pace for the run's requests to LLM providers (SPEC §14), on unless ``--agent-eval-pace
    off``.
    """
