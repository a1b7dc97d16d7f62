"""The known LLM clients' infrastructure exceptions (SPEC §14).

Raised out of an agent, they end its case as an error, not a failure, with the traffic hook on or
off.

A client's library is never imported here: only one the agent has loaded already (``sys.modules``)
can have raised.
"""

from __future__ import annotations

import sys
from typing import Any

from pytest_agent_eval.secrets import scrub_url  # not the cassette's module: it imports PyYAML

INFRASTRUCTURE: dict[str, tuple[str, ...]] = {
    "openai": ("APIConnectionError", "APITimeoutError", "RateLimitError", "InternalServerError"),
    "anthropic": (
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "OverloadedError",
        "DeadlineExceededError",
    ),
    "httpx": ("TransportError",),
    "httpx2": ("TransportError",),
}
"""Module -> its classes of failures that are the network's or the provider's, never the agent's."""


def _classes() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name, names in INFRASTRUCTURE.items():
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            cls = getattr(module, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


def infrastructure_error(exc: BaseException) -> str | None:
    """What failed, naming the request, when ``exc`` is a known client's infrastructure error.

    ``exc`` or an exception it was raised ``from``. Else ``None``.
    """
    classes = _classes()
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen and classes:
        seen.add(id(cause))
        if isinstance(cause, classes):
            return _described(cause)
        cause = cause.__cause__
    return None


def _described(exc: BaseException) -> str:
    """A client's exception as what failed, naming the request.

    ``POST <url> answered 429 Too Many Requests (openai.RateLimitError)``, or ``POST <url> failed:
    <why>``.
    """
    name = f"{type(exc).__module__.partition('.')[0]}.{type(exc).__name__}"
    request = _request(exc)
    where = (
        f"{request.method} {scrub_url(str(request.url))}" if request is not None else "a request"
    )
    response: Any = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        reason = getattr(response, "reason_phrase", "") or ""
        return f"{where} answered {status} {reason}".rstrip() + f" ({name})"
    text = str(exc) or type(exc).__name__
    root = exc.__cause__ or exc.__context__
    if root is not None and str(
        root
    ):  # the client's "Connection error." says less than the socket's error
        text += f" ({type(root).__name__}: {root})"
    return f"{where} failed: {name}: {text}"


def _request(exc: BaseException) -> Any:
    try:
        request = getattr(exc, "request", None)  # httpx's raises RuntimeError when none was set
    except RuntimeError:
        return None
    return request if hasattr(request, "method") and hasattr(request, "url") else None
