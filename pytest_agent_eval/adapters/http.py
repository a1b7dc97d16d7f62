"""Agents served over HTTP (SPEC §15): each user message is one POST of a JSON body.

Written ``agent: http://host:port/path`` or ``agent: {url, headers, body, output, session}``. The
reply's JSON is read at ``output``.

Sent with ``httpx`` (or ``httpx2``) when installed, the client the traffic hook sees, so that its
calls are recorded, replayed, retried and counted by the rate limits like every LLM request; with
neither installed, with ``urllib.request``, which the hook does not see: a case under a traffic
option then errors, saying what to install. Called off the event loop like any sync agent. Header
values take environment variables by name (``${AGENT_TOKEN}``), read when the agent is first
resolved; their values are never written anywhere (messages name the variable, the URL without its
query). Connection failures, timeouts, 429 and 5xx answers are infrastructure errors (the case
errors, it does not fail); another status fails the call.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from pytest_agent_eval.adapters.base import Agent, StandIn
from pytest_agent_eval.adapters.plain import normalise as plain_normalise
from pytest_agent_eval.adapters.recognise import http_reference
from pytest_agent_eval.core.results import RunRecord
from pytest_agent_eval.core.trial import TRIAL
from pytest_agent_eval.secrets import remember, remember_url

DEFAULT_BODY: dict[str, Any] = {"message": "{message}", "session_id": "{session}"}
ANSWER_KEYS = ("output", "response", "answer", "reply", "message", "text", "content")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"\{(message|session|case_id|trial)\}")
_KEYS = frozenset({"url", "headers", "body", "output", "session", "timeout"})
MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
TIMEOUT_S = 300.0
"""The socket timeout of one request; a case's own ``timeout:`` bounds the call as for any agent."""
VOLATILE = "agent_eval_volatile"
"""The request extension the traffic hook reads (``traffic.hook.VOLATILE``).

Its value is ``{bytes: placeholder}`` of the run-dependent text in the body (the session id),
recorded and matched as the placeholder.
"""
SESSION_PLACEHOLDER = b"<session>"
NO_HTTPX = (
    "the HTTP agent's calls are recorded and replayed through httpx, which is not installed: "
    "pip install 'pytest-agent-evalset[traffic]'"
)


class HttpAgentError(TypeError):
    """An HTTP agent's configuration that cannot work.

    For example a missing environment variable or an unknown key.
    """


@dataclass(frozen=True)
class Unreachable:
    """What a call returns when the service could not answer.

    This is an infrastructure error, not the agent's.
    """

    message: str


@dataclass
class HttpAgent:
    """One configured service.

    ``__call__(message, context)`` posts one user message and returns the reply read.
    """

    url: str
    headers: dict[str, str]
    body: Any = field(default_factory=lambda: DEFAULT_BODY)
    output: str | None = None
    session_from: str | None = None
    timeout: float = TIMEOUT_S
    _sessions: dict[tuple[str, int] | None, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _client: Any = field(default=None, repr=False, compare=False)
    """The ``httpx.Client`` of every call, made at the first."""

    def __post_init__(self) -> None:
        remember_url(self.url)  # a password in the URL is scrubbed wherever it would be written

    @property
    def shown(self) -> str:
        """The URL as messages show it, without its userinfo and query string.

        Those are left out because they may hold a key.
        """
        return shown_url(self.url)

    def session(self) -> str:
        key = TRIAL.get()
        with self._lock:
            if key not in self._sessions:
                self._sessions[key] = uuid.uuid4().hex
            return self._sessions[key]

    def __call__(self, message: str, context: dict[str, Any]) -> Any:
        trial = TRIAL.get()
        session = self.session()
        values = {
            "message": message,
            "session": session,
            "case_id": trial[0] if trial else "",
            "trial": str(trial[1]) if trial else "0",
        }
        data = json.dumps(fill(self.body, values)).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.headers}
        httpx = _httpx()
        if httpx is None:
            if _traffic_on():
                raise HttpAgentError(NO_HTTPX)
            return self._post_urllib(data, headers)
        return self._post(httpx, data, headers, session)

    def _post(self, httpx: Any, data: bytes, headers: dict[str, str], session: str) -> Any:
        """One POST through ``httpx``; the session id marked as run-dependent for the traffic hook.

        A redirect is followed on the service's own origin only (see :meth:`_redirect`).
        """
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout, follow_redirects=False)
            client = self._client
        volatile = {
            json.dumps(session)[1:-1].encode(): SESSION_PLACEHOLDER
        }  # as it is written in the JSON body
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            try:
                answer = client.post(
                    url, content=data, headers=headers, extensions={VOLATILE: volatile}
                )
            except (
                httpx.TransportError
            ) as exc:  # refused, reset, cut mid-body, a timeout, a replay miss
                return Unreachable(f"POST {shown_url(url)}: {exc or type(exc).__name__}")
            status, content_type = answer.status_code, answer.headers.get("content-type", "")
            if status not in _REDIRECTS:
                break
            target = self._redirect(url, answer.headers.get("location"))
            if isinstance(target, Unreachable):
                return target
            url = target
        else:
            return Unreachable(f"POST {self.shown}: more than {MAX_REDIRECTS} redirects")
        if status >= 400:
            return self._refused(status, answer.content)
        return self.read(answer.content, status, content_type)

    def _redirect(self, url: str, location: str | None) -> str | Unreachable:
        """Where a redirect from ``url`` leads, when it stays on the service's origin.

        The origin is scheme, host and port. A redirect elsewhere is not followed (the agent's
        credentials would go with it) and is not an answer.
        """
        target = urljoin(url, location or "")
        if _origin(target) != _origin(self.url):
            return Unreachable(
                f"POST {shown_url(url)} was redirected to another origin "
                f"{shown_url(_origin(target))}: not followed "
                "(the agent's headers are never sent to another origin); "
                "set url: to the address that answers"
            )
        return target

    def _post_urllib(self, data: bytes, headers: dict[str, str]) -> Any:
        """One POST through ``urllib`` (no ``httpx``, no traffic option).

        Redirects are followed as :meth:`_post` follows them.
        """
        import http.client  # with urllib and ssl: only when a service is called
        import urllib.error
        import urllib.request

        class NoRedirects(urllib.request.HTTPRedirectHandler):
            """Redirects left to the loop below (which follows them on the same origin only)."""

            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        opener = urllib.request.build_opener(NoRedirects)
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            request = urllib.request.Request(url, data=data, method="POST", headers=headers)
            try:
                with opener.open(request, timeout=self.timeout) as answer:
                    return self.read(
                        answer.read(), answer.status, answer.headers.get("content-type", "")
                    )
            except urllib.error.HTTPError as exc:
                status, body, location = exc.code, exc.read(), exc.headers.get("location")
            except (
                urllib.error.URLError,
                OSError,
                http.client.HTTPException,
            ) as exc:  # refused, reset, cut off
                reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                return Unreachable(f"POST {shown_url(url)}: {reason or type(reason).__name__}")
            if status not in _REDIRECTS:
                return self._refused(
                    status, body
                )  # out of the handler: a failed call shows no urllib traceback
            target = self._redirect(url, location)
            if isinstance(target, Unreachable):
                return target
            url = target
        return Unreachable(f"POST {self.shown}: more than {MAX_REDIRECTS} redirects")

    def _refused(self, status: int, body: bytes) -> Unreachable:
        """A 429 or 5xx answer is infrastructure's; another status fails the call (raised)."""
        where = f"POST {self.shown} answered {status}"
        excerpt = body[:200].decode(errors="replace")
        if status == 429 or status >= 500:
            return Unreachable(f"{where}: {excerpt}")
        raise RuntimeError(f"{where}: {excerpt}")

    def read(
        self, raw: bytes, status: int = 200, content_type: str = ""
    ) -> dict[str, Any] | Unreachable:
        """The reply as a result the plain adapter reads.

        That is the answer under ``output``, tool calls, metadata. A plain-text reply is the answer;
        an HTML page (a proxy's error, a sign-in page) or JSON cut off is not: an infrastructure
        error.
        """
        try:
            reply = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            text = raw.decode(errors="replace")
            start = text.lstrip()[:15].lower()
            where = f"POST {self.shown} answered {status}"
            if "html" in content_type.lower() or start.startswith(("<!doctype", "<html")):
                return Unreachable(
                    f"{where} with an HTML page, not JSON: {' '.join(text[:200].split())}"
                )
            if "json" in content_type.lower() or start.startswith(("{", "[")):
                return Unreachable(
                    f"{where} with a JSON body cut off or malformed (not JSON: {exc})"
                )
            return {"output": text}
        if self.session_from is not None:
            found = at_path(reply, self.session_from)
            if isinstance(found, (str, int)):
                with self._lock:
                    self._sessions[TRIAL.get()] = str(found)
        if self.output is not None:
            answer = at_path(reply, self.output)
            if answer is _MISSING:
                raise ValueError(
                    f"the reply of {self.shown} has nothing at output path {self.output!r}: "
                    "its keys are "
                    f"{sorted(reply) if isinstance(reply, dict) else type(reply).__name__}"
                )
        elif isinstance(reply, dict):
            answer = next((reply[k] for k in ANSWER_KEYS if k in reply), _MISSING)
            if answer is _MISSING:
                raise ValueError(
                    f"the reply of {self.shown} has none of the keys {', '.join(ANSWER_KEYS)} "
                    f"(its keys: {sorted(reply)}): set `output:` to the path of the answer, "
                    "e.g. output: data.text"
                )
        else:
            answer = reply
        result: dict[str, Any] = {
            "output": answer if isinstance(answer, str) else json.dumps(answer)
        }
        if isinstance(reply, dict):
            for key in ("tools_called", "tool_calls", "usage", "metadata"):
                if key in reply:
                    result[key] = reply[key]
        return result


_MISSING: Any = object()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{port}"


def shown_url(url: str) -> str:
    """``url`` as messages show it: without userinfo, query string and fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _httpx() -> Any:
    """``httpx``, else ``httpx2`` (the traffic hook patches both), else ``None``."""
    for name in ("httpx", "httpx2"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _traffic_on() -> bool:
    """Whether the traffic hook watches this trial (a traffic option is on).

    Never loads the hook to tell.
    """
    scope = sys.modules.get("pytest_agent_eval.traffic.scope")
    return scope is not None and scope.CURRENT.get() is not None


def at_path(value: Any, path: str) -> Any:
    """``value`` at a dotted path (``data.choices.0.text``); ``_MISSING`` when it is not there."""
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def fill(template: Any, values: dict[str, str]) -> Any:
    """The body template with its placeholders put in its strings.

    The placeholders are ``{message}``, ``{session}``, ``{case_id}`` and ``{trial}``.
    """
    if isinstance(template, str):
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def expand_env(value: str, where: str) -> str:
    """``${NAME}`` replaced by the environment variable's value.

    A missing variable is an error naming it.
    """

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise HttpAgentError(f"{where}: the environment variable {name} is not set")
        remember(os.environ[name])  # never written anywhere, whatever echoes it
        return os.environ[name]

    return _ENV.sub(one, value)


def http_agent(ref: str | dict[str, Any]) -> HttpAgent:
    """The :class:`HttpAgent` a reference describes."""
    if isinstance(ref, str):
        return HttpAgent(url=ref, headers={})
    unknown = sorted(set(ref) - _KEYS)
    if unknown:
        raise HttpAgentError(
            f"HTTP agent: unknown key(s) {unknown}; use {', '.join(sorted(_KEYS))}"
        )
    headers = {
        str(k): expand_env(str(v), f"HTTP agent header {k!r}")
        for k, v in (ref.get("headers") or {}).items()
    }
    session = ref.get("session") or {}
    return HttpAgent(
        url=ref["url"],
        headers=headers,
        body=ref.get("body", DEFAULT_BODY),
        output=ref.get("output"),
        session_from=session.get("from") if isinstance(session, dict) else None,
        timeout=float(ref.get("timeout", TIMEOUT_S)),
    )


class HttpAdapter:
    """Agents served over HTTP, recognised by their reference (a URL or ``{url, ...}``).

    Nothing is imported.
    """

    name = "http"

    def recognises(self, obj: Any) -> bool:
        return http_reference(obj)

    def agent(self, obj: Any, name: str) -> Agent:
        service = obj if isinstance(obj, HttpAgent) else http_agent(obj)
        return Agent(call=service, is_async=False, name=service.shown, adapter=self, source=service)

    def normalise(self, result: Any) -> RunRecord:
        if isinstance(result, Unreachable):
            message = result.message
            return RunRecord(
                error=f"infrastructure error (not the agent's): {message}", infra_error=message
            )
        return plain_normalise(result)

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        return None  # a service's tools run in the service: tool mocks cannot reach them

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        return None


ADAPTER = HttpAdapter()
