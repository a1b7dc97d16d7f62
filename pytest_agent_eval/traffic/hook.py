"""The hook at the ``httpx`` transport layer (``httpx`` and ``httpx2``; sync and async) and what it does with each
request a case makes: replay or record it, wait for the rate limit, retry 429/5xx answers, count usage and cost.

Installed only while an option needs it (``install``/``uninstall``); a request made outside a case passes
through untouched. The response the agent gets is read whole first (a streamed answer arrives at once).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_agent_eval.secrets import CREDENTIAL_HEADERS, remember
from pytest_agent_eval.traffic.cassette import (
    Cassette,
    CassetteError,
    Interaction,
    body_text,
    cassette_path,
    match_key,
    old_cassette_path,
    scrub_url,
)
from pytest_agent_eval.traffic.limits import Limits
from pytest_agent_eval.traffic.scope import CURRENT, CaseTraffic, TrialTraffic, shown
from pytest_agent_eval.traffic.usage import Prices, read_usage

if TYPE_CHECKING:
    from pytest_agent_eval.cases.model import Case

T = TypeVar("T")
_DROPPED = frozenset({"content-encoding", "transfer-encoding", "content-length"})
VOLATILE = "agent_eval_volatile"
"""A request extension set by the plugin's own senders (the HTTP agent: ``adapters.http.VOLATILE``): ``{bytes:
placeholder}`` of run-dependent text in the body (a session id), recorded and matched as the placeholder, so that
a replay, whose ids are new, matches the recording."""
MAX_RETRY_WAIT_S = 60.0
"""How the runner's message of a case's timeout begins."""


@dataclass
class TrafficSettings:
    """What the hook does: cassettes, retries, prices, budgets."""

    root: Path
    """The rootdir: cassette paths in messages are relative to it."""
    mode: str | None = None
    cassettes: Path | None = None
    """The cassette folder (ini ``agent_eval_cassettes``); ``None``: ``cassettes/`` beside each eval file."""
    ignore: frozenset[str] = frozenset()
    """JSON fields left out when requests are matched."""
    retries: int = 3
    prices: Prices = field(default_factory=Prices)
    limits: Limits | None = None


class Traffic:
    """The hook's behaviour for one session."""

    def __init__(self, settings: TrafficSettings) -> None:
        self.settings = settings
        self._errors: dict[str, type[Exception]] = {}

    # -- cases and trials ------------------------------------------------------------------------------------

    def case(self, case: Case) -> CaseTraffic:
        """The case's traffic scope; ``CassetteError`` when its cassette cannot be read."""
        if self.settings.mode is None:
            return CaseTraffic(case.id, None)
        if self.settings.cassettes is None:
            folder = case.path.parent / "cassettes"
            path, old = cassette_path(folder, case.path, case.id), old_cassette_path(folder, case.path, case.id)
        else:
            path, old = cassette_path(self.settings.cassettes, case.path, case.id, self.settings.root), None
        cassette = Cassette(path, self.settings.ignore, load=self.settings.mode != "record", old=old)
        return CaseTraffic(case.id, cassette, shown(path, self.settings.root))

    async def run_trials(
        self, case: Case, repeat: int, run: Callable[[int], Awaitable[T]], fail: Callable[[T | None, str], T]
    ) -> list[T]:
        """The case's trials, each with its own traffic scope; then the cassette is written when recording. A
        cassette that cannot be read or written is an infrastructure error of the case, which the runner's ``fail``
        makes of a trial (or of none: the agent is not run when the cassette cannot be read)."""
        try:
            traffic = self.case(case)
        except CassetteError as exc:
            return [fail(None, shown_error(exc, self.settings))]

        async def one(n: int) -> T:
            trial = traffic.trial()
            token = CURRENT.set(trial)
            try:
                return await run(n)  # the runner reads the trial's usage and infrastructure error (CURRENT)
            finally:
                CURRENT.reset(token)

        # one trial in this task, without a gather: a sync agent's trial then needs no loop (``eager``)
        trials = [await one(0)] if repeat == 1 else list(await asyncio.gather(*(one(n) for n in range(repeat))))
        if self.settings.mode in ("record", "new") and traffic.cassette is not None and not traffic.failed:
            try:
                traffic.cassette.save(keep_old=self.settings.mode == "new")
            except OSError as exc:
                why = f"cassette {traffic.cassette_name} not written: {exc.strerror or exc}"
                trials = [fail(t, why) for t in trials]
        return trials

    # -- one request -----------------------------------------------------------------------------------------

    def _error(self, module: Any) -> type[Exception]:
        """The exception a replay miss raises: a transport error of the client's own httpx."""
        cls = self._errors.get(module.__name__)
        if cls is None:
            cls = self._errors[module.__name__] = type("ReplayMiss", (module.TransportError,), {})
        return cls

    def _replayed(self, module: Any, request: Any, trial: TrialTraffic) -> Any:
        """The recorded answer, or ``None`` to go to the network; raises on a miss under replay."""
        cassette = trial.case.cassette
        if cassette is None or self.settings.mode == "record":
            return None
        key = match_key(request.method, str(request.url), stable_body(request), self.settings.ignore)
        hit = cassette.take(key)
        if hit is not None:
            trial.count(read_usage(hit.response_bytes, hit.response_type or ""), self.settings.prices)
            headers = [("content-type", hit.response_type)] if hit.response_type else []
            return module.Response(hit.status, headers=headers, content=hit.response_bytes)
        if self.settings.mode != "replay":
            return None
        where = (
            f"no recorded answer in {trial.case.cassette_name}"
            if cassette.exists
            else f"no cassette {trial.case.cassette_name}"
        )
        message = (
            f"replay miss: {request.method} {scrub_url(str(request.url))} ({where}; record it with "
            "--agent-eval-record=new)"
        )
        trial.fail(message)
        error: Any = self._error(module)
        raise error(message, request=request)

    def _retry_in(self, response: Any, attempt: int) -> float | None:
        """Seconds to wait before trying again, or ``None`` when the answer is final."""
        if not (response.status_code == 429 or response.status_code >= 500) or attempt >= self.settings.retries:
            return None
        return retry_delay(response.headers, attempt)

    def _answer(self, module: Any, request: Any, response: Any, attempt: int, trial: TrialTraffic) -> Any:
        """The response the agent gets (already read), after counting and recording it."""
        body = response.content
        described = f"{request.method} {scrub_url(str(request.url))}"
        if response.status_code == 429 or response.status_code >= 500:
            retried = f" after {attempt} retr{'y' if attempt == 1 else 'ies'}" if attempt else ""
            trial.fail(f"{described} answered {response.status_code} {response.reason_phrase}{retried}")
        else:
            trial.count(read_usage(body, response.headers.get("content-type", "")), self.settings.prices)
            cassette = trial.case.cassette
            if cassette is not None and self.settings.mode in ("record", "new"):
                cassette.add(
                    Interaction(
                        method=request.method,
                        uri=scrub_url(str(request.url)),
                        request_body=body_text(stable_body(request)) if request.content else None,
                        request_type=request.headers.get("content-type"),
                        status=response.status_code,
                        reason=response.reason_phrase,
                        response_type=response.headers.get("content-type"),
                        response_body=body_text(body),
                        trial=trial.number,
                    )
                )
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DROPPED]
        return module.Response(response.status_code, headers=headers, content=body, extensions=response.extensions)

    def _connect_failed(self, request: Any, exc: Exception, trial: TrialTraffic) -> None:
        text = str(exc) or type(exc).__name__
        trial.fail(f"{request.method} {scrub_url(str(request.url))} failed: {type(exc).__name__}: {text}")

    def handle(self, module: Any, request: Any, send: Callable[[Any], Any], trial: TrialTraffic) -> Any:
        request.read()
        remember_credentials(request)
        replayed = self._replayed(module, request, trial)
        if replayed is not None:
            return replayed
        limits = self.settings.limits
        attempt = 0
        while True:
            if limits is not None:
                with trial.waiting("the run's rate limit (--agent-eval-rate-limit / --agent-eval-token-limit)"):
                    limits.request()
            try:
                response = send(request)
                try:
                    response.read()
                finally:
                    response.close()
            except Exception as exc:  # the transport failed (refused, reset, cut mid-body, a timeout): infrastructure
                self._connect_failed(request, exc, trial)
                raise
            wait = self._retry_in(response, attempt)
            if wait is None:
                break
            with trial.waiting(f"a retry of {request.method} {scrub_url(str(request.url))} ({wait:.3g} s)"):
                time.sleep(wait)
            attempt += 1
        answer = self._answer(module, request, response, attempt, trial)
        if limits is not None:
            limits.spend(_tokens(answer))
        return answer

    async def handle_async(
        self, module: Any, request: Any, send: Callable[[Any], Awaitable[Any]], trial: TrialTraffic
    ) -> Any:
        await request.aread()
        remember_credentials(request)
        replayed = self._replayed(module, request, trial)
        if replayed is not None:
            return replayed
        limits = self.settings.limits
        attempt = 0
        while True:
            if limits is not None:
                with trial.waiting("the run's rate limit (--agent-eval-rate-limit / --agent-eval-token-limit)"):
                    await limits.request_async()
            try:
                response = await send(request)
                try:
                    await response.aread()
                finally:
                    await response.aclose()
            except Exception as exc:  # the transport failed (refused, reset, cut mid-body, a timeout): infrastructure
                self._connect_failed(request, exc, trial)
                raise
            wait = self._retry_in(response, attempt)
            if wait is None:
                break
            with trial.waiting(f"a retry of {request.method} {scrub_url(str(request.url))} ({wait:.3g} s)"):
                await asyncio.sleep(wait)
            attempt += 1
        answer = self._answer(module, request, response, attempt, trial)
        if limits is not None:
            await limits.spend_async(_tokens(answer))
        return answer


def remember_credentials(request: Any) -> None:
    """The request's credential headers' values are secrets: never written, whatever echoes them."""
    for name, value in request.headers.items():
        if name.lower() in CREDENTIAL_HEADERS:
            remember(value)


def stable_body(request: Any) -> bytes:
    """The request's body with its run-dependent text (``VOLATILE``) replaced by placeholders."""
    body: bytes = request.content
    for text, placeholder in (request.extensions.get(VOLATILE) or {}).items():
        body = body.replace(text, placeholder)
    return body


def _tokens(response: Any) -> int:
    call = read_usage(response.content, response.headers.get("content-type", ""))
    return call.input_tokens + call.output_tokens if call is not None else 0


def shown_error(exc: CassetteError, settings: TrafficSettings) -> str:
    """A cassette's error with its path relative to the rootdir."""
    text = str(exc)
    root = f"{settings.root}{os.sep}"
    return text[len(root) :] if text.startswith(root) else text


def retry_delay(headers: Any, attempt: int) -> float:
    """The server's ``retry-after-ms`` / ``Retry-After`` (seconds or a date), else exponential backoff with jitter."""
    try:
        if headers.get("retry-after-ms"):
            return min(float(headers["retry-after-ms"]) / 1000.0, MAX_RETRY_WAIT_S)
        after = headers.get("retry-after")
        if after:
            try:
                seconds = float(after)
            except ValueError:
                when = email.utils.parsedate_to_datetime(after)
                seconds = when.timestamp() - time.time()
            return min(max(seconds, 0.0), MAX_RETRY_WAIT_S)
    except (TypeError, ValueError, OverflowError):
        pass
    backoff: float = min(0.5 * 2.0**attempt, 8.0)
    return backoff * random.uniform(0.5, 1.0)


# -- installing the hook -------------------------------------------------------------------------------------

_ACTIVE: list[Traffic] = []
_PATCHED: list[tuple[type, str, Any]] = []


def install(traffic: Traffic) -> None:
    """Route every ``httpx``/``httpx2`` transport request through ``traffic`` (until ``uninstall``)."""
    _ACTIVE[:] = [traffic]
    if _PATCHED:
        return
    seen: set[int] = set()
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if id(module) in seen:  # httpx2's alias_httpx() makes both names one module
            continue
        seen.add(id(module))
        _patch(module.HTTPTransport, "handle_request", _sync_hook(module, module.HTTPTransport.handle_request))
        _patch(
            module.AsyncHTTPTransport,
            "handle_async_request",
            _async_hook(module, module.AsyncHTTPTransport.handle_async_request),
        )


def uninstall() -> None:
    while _PATCHED:
        cls, name, original = _PATCHED.pop()
        setattr(cls, name, original)
    _ACTIVE.clear()


def _patch(cls: type, name: str, replacement: Any) -> None:
    _PATCHED.append((cls, name, cls.__dict__[name]))
    setattr(cls, name, replacement)


def _sync_hook(module: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    def handle_request(self: Any, request: Any) -> Any:
        trial = CURRENT.get()
        if trial is None or not _ACTIVE:
            return original(self, request)
        return _ACTIVE[0].handle(module, request, lambda r: original(self, r), trial)

    return handle_request


def _async_hook(module: Any, original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        trial = CURRENT.get()
        if trial is None or not _ACTIVE:
            return await original(self, request)
        return await _ACTIVE[0].handle_async(module, request, lambda r: original(self, r), trial)

    return handle_async_request
