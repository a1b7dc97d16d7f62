"""When an answer is retried and how long to wait first: the server's ``Retry-After``, else backoff as the official
SDKs; a spent quota is never retried."""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from typing import Any

MAX_RETRY_WAIT_S = 60.0
"""A server that asks to wait longer is not retried: the request fails at once, saying so."""


def quota_spent(body: bytes) -> bool:
    """A 429 whose body says the account's quota is spent (OpenAI's ``insufficient_quota``): waiting cannot help."""
    if b"insufficient_quota" not in body:
        return False
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and "insufficient_quota" in (error.get("code"), error.get("type"))


def asked_wait(headers: Any) -> float | None:
    """The wait the server asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date (one in
    the past: at once). A value that cannot be used (NaN, infinite, negative, neither a number nor a date) is as if
    absent: ``None``, and the usual backoff applies."""
    try:
        if headers.get("retry-after-ms"):
            return _usable(float(headers["retry-after-ms"]) / 1000.0)
        after = headers.get("retry-after")
        if after:
            try:
                return _usable(float(after))
            except ValueError:
                return max(email.utils.parsedate_to_datetime(after).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError, IndexError):
        pass
    return None


def _usable(seconds: float) -> float | None:
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter, as the official SDKs: 0.5 s doubling up to 8 s, less a quarter at random."""
    delay: float = min(0.5 * 2.0**attempt, 8.0)
    return delay * random.uniform(0.75, 1.0)


def retry_delay(headers: Any, attempt: int) -> float:
    """The server's ``retry-after-ms`` / ``Retry-After`` (at most ``MAX_RETRY_WAIT_S``), else ``backoff``."""
    asked = asked_wait(headers)
    return min(asked, MAX_RETRY_WAIT_S) if asked is not None else backoff(attempt)
