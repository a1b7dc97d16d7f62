"""Secrets are never written (README, "Trust"): scrubbed by pattern *and* by value.

* By pattern: a URL's userinfo (``http://user:SECRET@host``, ``redis://:SECRET@host``); query
  parameters and JSON fields whose name looks secret (``api_key``, ``password``, ``private_key``,
  ``accessKey``, ``X-Amz-Credential``, ``Authorization`` ... of any value type; ``token``, ``auth``,
  ``key`` unless the value is a number, as ``max_tokens`` is).
* By value: every secret this process learns (an HTTP agent's ``${VAR}`` header values, the
  credential headers the traffic hook sees a request carry, URL passwords) is replaced wherever it
  appears, in cassettes, messages and records.

Plain Python, no pytest: used by the cassettes, the HTTP agent, the records and the reports.
"""

from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SCRUBBED = "<scrubbed>"
MIN_LENGTH = 6
"""Shorter values are not remembered as secrets (replacing ``abc`` everywhere would garble every
text).
"""
_ALWAYS = re.compile(
    r"password|passwd|^pwd$|passphrase|secret|privatekey|apikey|accesskey|credential|signature|authorization|cookie"
)
"""Names (lower case, without ``-`` and ``_``) whose value is scrubbed whatever its type."""
_UNLESS_NUMBER = re.compile(r"token(?!s)|^auth|^key$|^sig$|sessionid|^session$")
"""Names whose value is scrubbed unless it is a number, a bool or null (``max_tokens``,
``token_count`` stay).
"""
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "x-auth-token",
    }
)
"""Request headers whose values the traffic hook remembers as secrets (``Bearer`` and the like left
out).
"""
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s?#]*)@")

_known: set[str] = set()
_ordered: list[str] = []
_lock = threading.Lock()


def secret_name(name: object, value: Any) -> bool:
    """Whether a field or parameter called ``name`` holding ``value`` is a secret."""
    key = str(name).lower().replace("-", "").replace("_", "")
    if _ALWAYS.search(key):
        return True
    number = value is None or isinstance(value, (bool, int, float))
    return not number and bool(_UNLESS_NUMBER.search(key))


def remember(value: str) -> None:
    """Scrub ``value`` from everything written from now on.

    For ``Bearer x``/``Basic x``, ``x`` too.
    """
    parts = [value, *value.split(None, 1)[1:]]
    with _lock:
        for part in parts:
            part = part.strip()
            if len(part) >= MIN_LENGTH and part not in _known:
                _known.add(part)
                _ordered.append(part)
                _ordered.sort(key=len, reverse=True)  # a longer secret before one it contains


def forget() -> None:
    """Forget every remembered secret.

    A session's secrets are its own (``pytest.main`` run again in one process, pytester's in-process
    runs).
    """
    with _lock:
        _known.clear()
        _ordered.clear()


def remember_url(url: str) -> None:
    """Remember the password (and user) of ``url``'s userinfo."""
    for match in _USERINFO.finditer(url):
        for part in match.group("userinfo").split(":", 1):
            remember(part)


def scrub_text(text: str) -> str:
    """``text`` with URL userinfo and every remembered secret replaced by ``<scrubbed>``."""
    if "@" in text:
        text = _USERINFO.sub(
            lambda m: f"{m.group('scheme')}{SCRUBBED}@" if m.group("userinfo") else m.group(0), text
        )
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, SCRUBBED)
    return text


def scrub_url(url: str) -> str:
    """``url`` without userinfo, secret-looking query parameters or remembered secrets.

    Secret-looking query parameters (``api_key``, ``key``, ``token``) and every remembered secret
    are replaced.
    """
    parts = urlsplit(url)
    if parts.query:
        query = [
            (k, SCRUBBED if secret_name(k, v) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        url = urlunsplit(parts._replace(query=urlencode(query, safe="<>")))
    return scrub_text(url)


def scrub_data(data: Any) -> Any:
    """JSON data with secret-named fields replaced and every string scrubbed.

    Secret-named fields are replaced whatever their value type (see :func:`secret_name`); strings
    are scrubbed of URL userinfo and remembered secrets.
    """
    if isinstance(data, dict):
        return {
            k: SCRUBBED if secret_name(k, v) and v not in ("", None) else scrub_data(v)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [scrub_data(v) for v in data]
    if isinstance(data, str):
        return scrub_text(data)
    return data


def any_known() -> bool:
    """Whether a secret value was remembered (records need a pass over every string only then)."""
    return bool(_ordered)


def scrub_strings(data: Any) -> Any:
    """JSON data with every string scrubbed of URL userinfo and remembered secrets.

    Field names are left as they are: for the plugin's own records, whose names are not secrets.
    ``data`` itself when there is nothing to scrub.
    """
    if not _ordered and "@" not in repr(
        data
    ):  # nothing to scrub: told by one pass in C (JSON data's repr)
        return data
    return _scrubbed(data)


def _scrubbed(data: Any) -> Any:
    if isinstance(data, str):
        return scrub_text(data) if "@" in data or _ordered else data
    if isinstance(data, dict):
        return {k: _scrubbed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_scrubbed(v) for v in data]
    return data
