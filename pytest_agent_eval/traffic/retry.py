"""When an answer is retried and how long to wait first.

The server's ``Retry-After``, else backoff as the official SDKs; a spent quota is never retried.
"""

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
    """A 429 whose body says the account's quota is spent: waiting cannot help.

    OpenAI's ``insufficient_quota``.
    """
    if b"insufficient_quota" not in body:
        return False
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and "insufficient_quota" in (
        error.get("code"),
        error.get("type"),
    )


def asked_wait(headers: Any) -> float | None:
    """The wait the server asks for.

    ``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date (one in the past: at once).
    A value that cannot be used (NaN, infinite, negative, neither a number nor a date) is as if
    absent: ``None``, and the usual backoff applies.
    """
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
    """Exponential backoff with jitter, as the official SDKs.

    0.5 s doubling up to 8 s, less a quarter at random.
    """
    delay: float = min(0.5 * 2.0**attempt, 8.0)
    return delay * random.uniform(0.75, 1.0)


def retry_delay(headers: Any, attempt: int) -> float:
    """The server's ``retry-after-ms`` / ``Retry-After``, else ``backoff``.

    The server's wait is at most ``MAX_RETRY_WAIT_S``.
    """
    asked = asked_wait(headers)
    return min(asked, MAX_RETRY_WAIT_S) if asked is not None else backoff(attempt)


def verdict(
    response: Any, attempt: int, retries: int, watch: bool = True
) -> tuple[float | None, str | None]:
    """Whether to retry an answer, and after how long, or why it is a failure.

    ``(seconds to wait before trying again, None)``, or ``(None, why the answer is a failure)``, or
    ``(None, None)`` for an answer to hand over as it is; as the official SDKs decide
    (``x-should-retry``, 408/409/429/5xx), but a spent quota and a wait beyond the cap fail at once.
    ``watch`` false: the pace alone, which retries only its 429s.
    """
    status = response.status_code
    if status < 400 or (not watch and status != 429):
        return None, None
    told = response.headers.get("x-should-retry")
    transient = status in (408, 409, 429) or status >= 500
    retriable = told == "true" if told in ("true", "false") else transient
    if status == 429 and quota_spent(response.content):
        return None, "the quota is spent (insufficient_quota): not retried"
    if not retriable:
        return None, ("not retried (x-should-retry: false)" if transient and watch else None)
    asked = asked_wait(response.headers)
    if asked is not None and asked > MAX_RETRY_WAIT_S:
        return (
            None,
            f"the server asks to wait {asked:g} s, more than {MAX_RETRY_WAIT_S:g} s: not retried",
        )
    if attempt >= retries:
        return None, f"after {attempt} retr{'y' if attempt == 1 else 'ies'}" if attempt else ""
    return (asked if asked is not None else backoff(attempt)), None
