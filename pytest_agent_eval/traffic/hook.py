"""The hook at the ``httpx`` transport layer and what it does with each request a case makes.

It hooks ``httpx`` and ``httpx2``, sync and async. It replays or records a request, waits for the
rate limit, retries 429/5xx answers, counts usage and cost.

Installed only while an option needs it (``install``/``uninstall``); a request made outside a case
passes through untouched. The response the agent gets is read whole first (a streamed answer arrives
at once).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.core.trial import TRIAL
from pytest_agent_eval.secrets import CREDENTIAL_HEADERS, remember
from pytest_agent_eval.traffic.cassette import (
    Cassette,
    Interaction,
    body_text,
    cassette_path,
    match_key,
    old_cassette_path,
    scrub_url,
)
from pytest_agent_eval.traffic.pace import Pace
from pytest_agent_eval.traffic.retry import MAX_RETRY_WAIT_S, asked_wait, backoff, verdict
from pytest_agent_eval.traffic.scope import (
    CURRENT,
    CaseTraffic,
    SeenCall,
    TrialTraffic,
    relative_path,
)
from pytest_agent_eval.traffic.store import StoreError
from pytest_agent_eval.traffic.usage import Prices, read_usage

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case

READ_REQUEST, WAIT_PACE, SEND, READ_RESPONSE, SLEEP = (
    "read request",
    "wait pace",
    "send",
    "read response",
    "sleep",
)
"""The steps of a request that wait on I/O, carried out by the sync or the async hook."""
Step = tuple[str, Any]
"""``(kind, argument)``: a request, a host, a response or seconds."""
_DROPPED = frozenset({"content-encoding", "transfer-encoding", "content-length"})
VOLATILE = "agent_eval_volatile"
"""A request extension set by the plugin's own senders (the HTTP agent: ``adapters.http.VOLATILE``):
``{bytes: placeholder}`` of run-dependent text in the body (a session id), recorded and matched as
the placeholder, so that a replay, whose ids are new, matches the recording.
"""
PACED = (
    "the run's rate limits (--agent-eval-rate-limit / --agent-eval-token-limit, the provider's "
    "announced rate, a 429's cool-down)"
)
"""What a request held up by the run's pace waits for, as a case's timeout names it."""


@dataclass
class TrafficSettings:
    """What the hook does: cassettes, retries, prices, budgets."""

    root: Path
    """The rootdir: cassette paths in messages are relative to it."""
    mode: str | None = None
    cassettes: Path | None = None
    """The cassette folder (ini ``agent_eval_cassettes``); ``None``: ``cassettes/`` beside each eval
    file.
    """
    ignore: frozenset[str] = frozenset()
    """JSON fields left out when requests are matched."""
    retries: int = 3
    prices: Prices = field(default_factory=Prices)
    pace: Pace | None = None
    """The run's pace (written budgets, cool-downs, the provider's announced rate); ``None``: not
    paced.
    """
    keep_calls: bool = False
    """Keep each request of a trial for its chat span (``TrialTraffic.calls``): the run traces (SPEC
    §23).
    """
    watch: bool = True
    """``False``: the run's pace only (no traffic option): requests made inside a case are paced and
    their 429s retried; nothing is counted, recorded or marked.
    """
    send_back: bool = False
    """An xdist worker: recorded cassettes go to the controller, which writes them
    (:meth:`Traffic.finish`).
    """


class CassetteNotWritten(Exception):
    """A recorded cassette that could not be written.

    An infrastructure error of its case's trials.
    """


class Traffic:
    """The hook's behaviour for one session."""

    def __init__(self, settings: TrafficSettings) -> None:
        self.settings = settings
        self._errors: dict[str, type[Exception]] = {}

    # -- cases and trials
    # ------------------------------------------------------------------------------------

    def case(self, case: Case) -> CaseTraffic:
        """The case's traffic scope; ``CassetteError`` when its cassette cannot be read."""
        if self.settings.mode is None:
            return CaseTraffic(case.id, None, keep_calls=self.settings.keep_calls)
        beside, folder = (
            self.settings.cassettes is None,
            self.settings.cassettes or case.path.parent / "cassettes",
        )
        path = cassette_path(folder, case.path, case.id, None if beside else self.settings.root)
        old = old_cassette_path(folder, case.path, case.id) if beside else None
        cassette = Cassette(
            path, self.settings.ignore, load=self.settings.mode != "record", old=old, folder=folder
        )
        return CaseTraffic(
            case.id,
            cassette,
            relative_path(path, self.settings.root),
            self.settings.mode,
            keep_calls=self.settings.keep_calls,
        )

    @property
    def watching(self) -> bool:
        """Whether cases get a traffic scope (usage, cassettes, infrastructure errors).

        Else the pace alone.
        """
        if not self.settings.watch:
            adopt()  # an httpx loaded since the session started is paced too
        return self.settings.watch

    @contextlib.contextmanager
    def trial(self, traffic: CaseTraffic) -> Iterator[TrialTraffic]:
        """One trial's scope.

        Its requests are counted and their failures kept in the ``TrialTraffic`` given.
        """
        trial = traffic.trial()
        token = CURRENT.set(trial)
        try:
            yield trial
        finally:
            CURRENT.reset(token)

    def finish(self, traffic: CaseTraffic) -> tuple[str, str] | None:
        """The case's trials are done: its cassette is written when recording.

        ``CassetteNotWritten`` when it cannot be. On an xdist worker (``send_back``) nothing is
        written: ``(path, text)`` is returned for the runner to carry to the controller.
        """
        if (
            self.settings.mode not in ("record", "new")
            or traffic.cassette is None
            or traffic.failed
        ):
            return None
        try:
            return traffic.cassette.save(
                keep_old=self.settings.mode == "new", send=self.settings.send_back
            )
        except OSError as exc:
            raise CassetteNotWritten(
                f"cassette {traffic.cassette_name} not written: {exc.strerror or exc}"
            ) from exc

    # -- one request
    # -----------------------------------------------------------------------------------------

    def _error(self, module: Any, name: str = "ReplayMiss") -> type[Exception]:
        """The exception a replay miss (or the store's failure) raises.

        A transport error of the client's httpx.
        """
        cls = self._errors.get(f"{module.__name__}.{name}")
        if cls is None:
            cls = self._errors[f"{module.__name__}.{name}"] = type(
                name, (module.TransportError,), {}
            )
        return cls

    def _store_failed(
        self, module: Any, request: Any, exc: StoreError, trial: TrialTraffic | None
    ) -> Exception:
        """The run's rate-limit store failed (``StoreError``).

        The request is infrastructure's failure, not sent.
        """
        message = f"{request.method} {scrub_url(str(request.url))} not sent: {exc}"
        if trial is not None:
            trial.fail(message)
        error: Any = self._error(module, "RateLimitStoreError")
        return error(message, request=request)  # type: ignore[no-any-return]

    def _replayed(self, module: Any, request: Any, trial: TrialTraffic) -> Any:
        """The recorded answer, or ``None`` to go to the network; raises on a miss under replay."""
        cassette = trial.case.cassette
        if cassette is None or self.settings.mode == "record":
            return None
        key = match_key(
            request.method, str(request.url), stable_body(request), self.settings.ignore
        )
        hit = cassette.take(key)
        if hit is not None:
            now = time.time_ns()
            seen = (
                _seen(request, hit.response_bytes, hit.status, now, now)
                if trial.calls is not None
                else None
            )
            trial.count(
                read_usage(hit.response_bytes, hit.response_type or ""), self.settings.prices, seen
            )
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

    def _answer(
        self,
        module: Any,
        request: Any,
        response: Any,
        failure: str | None,
        trial: TrialTraffic | None,
        start: int = 0,
    ) -> Any:
        """The response the agent gets (already read), after counting and recording it.

        A failure is marked on the trial (forgotten if the client's own retry of the same request is
        answered) and told to the client with ``x-should-retry: false``, so that its retries do not
        stack on the hook's.
        """
        body = response.content
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DROPPED]
        if failure is not None:
            headers = [(k, v) for k, v in headers if k.lower() != "x-should-retry"] + [
                ("x-should-retry", "false")
            ]
            if trial is not None:
                described = f"{request.method} {scrub_url(str(request.url))}"
                text = f"{described} answered {response.status_code} {response.reason_phrase}"
                trial.fail(
                    text
                    + (
                        f" {failure}"
                        if failure.startswith("after")
                        else f": {failure}"
                        if failure
                        else ""
                    ),
                    _key(request),
                )
        elif trial is not None:
            if response.status_code < 400 and trial.infra_error is not None:
                trial.answered(_key(request))
            seen = None
            if trial.calls is not None:  # the run traces: the request's chat span
                seen = _seen(request, body, response.status_code, start, time.time_ns())
            trial.count(
                read_usage(body, response.headers.get("content-type", "")),
                self.settings.prices,
                seen,
            )
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
        return module.Response(
            response.status_code, headers=headers, content=body, extensions=response.extensions
        )

    def _connect_failed(self, request: Any, exc: Exception, trial: TrialTraffic | None) -> None:
        if trial is not None:
            text = str(exc) or type(exc).__name__
            message = (
                f"{request.method} {scrub_url(str(request.url))} failed: {type(exc).__name__}: "
                f"{text}"
            )
            trial.fail(message, _key(request))

    def _note_answer(self, host: str, response: Any, attempt: int, sent: float) -> None:
        """Tell the run's pace what an answer's status and headers say.

        A 429's cool-down: the wait it asks for.
        """
        pace = self.settings.pace
        if pace is not None:
            status = response.status_code
            cool = None
            if status == 429:
                asked = asked_wait(response.headers)
                cool = min(asked, MAX_RETRY_WAIT_S) if asked is not None else backoff(attempt)
            with contextlib.suppress(
                StoreError
            ):  # the pace remembers it: the next request fails, saying why
                pace.heard(host, status, response.headers, cool, time.monotonic() - sent)

    def _note_tokens(self, host: str, response: Any) -> None:
        pace = self.settings.pace
        if pace is not None and response.status_code < 400:
            with contextlib.suppress(StoreError):  # as in ``_note_answer``
                pace.spent(host, _tokens(response))

    def _exchange(
        self, module: Any, request: Any, trial: TrialTraffic | None
    ) -> Generator[Step, Any, Any]:
        """One request, replayed or sent, paced and retried: the loop of both hooks, sync and async.

        It yields each step that waits on I/O (:data:`Step`) for the hook's driver to carry out, and
        returns the response.
        """
        yield READ_REQUEST, request
        start = time.time_ns()  # a chat span's start, when the run traces
        if trial is not None:  # watched (the pace alone, as no hook before it, learns no secrets)
            remember_credentials(request)
        replayed = self._replayed(module, request, trial) if trial is not None else None
        if replayed is not None:
            return replayed
        pace = self.settings.pace
        host = _host(request)
        attempt = 0
        while True:
            try:
                with _waiting(trial, _paced(request, attempt)):
                    opens_host = (yield WAIT_PACE, host) if pace is not None else False
            except StoreError as exc:
                raise self._store_failed(module, request, exc, trial) from None
            sent = time.monotonic()
            try:
                try:
                    response = yield SEND, request
                except (
                    Exception
                ) as exc:  # the transport failed (refused, reset, a timeout): infrastructure
                    self._connect_failed(request, exc, trial)
                    raise
                self._note_answer(host, response, attempt, sent)
            finally:
                if (
                    opens_host and pace is not None
                ):  # the others may go: at the headers, not the whole body
                    pace.open(host)
            try:
                yield READ_RESPONSE, response
            except Exception as exc:  # the body was cut mid-way (reset, a timeout): infrastructure
                self._connect_failed(request, exc, trial)
                raise
            self._note_tokens(host, response)
            wait, failure = verdict(response, attempt, self.settings.retries, self.settings.watch)
            if wait is None:
                break
            if (
                pace is None or response.status_code != 429
            ):  # a 429's wait is the run's cool-down, in the pace
                with _waiting(
                    trial,
                    f"a retry of {request.method} {scrub_url(str(request.url))} ({wait:.3g} s)",
                ):
                    yield SLEEP, wait
            attempt += 1
        return self._answer(module, request, response, failure, trial, start)

    def handle(
        self, module: Any, request: Any, send: Callable[[Any], Any], trial: TrialTraffic | None
    ) -> Any:
        """One request of a sync client: :meth:`_exchange`'s steps carried out in this thread."""
        steps = self._exchange(module, request, trial)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                kind, arg = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as done:
                return done.value
            value, error = None, None
            try:
                if kind == SEND:
                    value = send(arg)
                elif kind == WAIT_PACE:
                    value = (
                        self.settings.pace.wait(arg) if self.settings.pace is not None else False
                    )
                elif kind == READ_REQUEST:
                    arg.read()
                elif kind == READ_RESPONSE:
                    try:
                        arg.read()
                    finally:
                        arg.close()
                else:
                    time.sleep(arg)
            except BaseException as exc:  # into the loop, which decides (and runs its clean-ups)
                error = exc

    async def handle_async(
        self,
        module: Any,
        request: Any,
        send: Callable[[Any], Awaitable[Any]],
        trial: TrialTraffic | None,
    ) -> Any:
        """One request of an async client: :meth:`_exchange`'s steps awaited on the running loop."""
        steps = self._exchange(module, request, trial)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                kind, arg = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as done:
                return done.value
            value, error = None, None
            try:
                if kind == SEND:
                    value = await send(arg)
                elif kind == WAIT_PACE:
                    value = (
                        await self.settings.pace.wait_async(arg)
                        if self.settings.pace is not None
                        else False
                    )
                elif kind == READ_REQUEST:
                    await arg.aread()
                elif kind == READ_RESPONSE:
                    try:
                        await arg.aread()
                    finally:
                        await arg.aclose()
                else:
                    import asyncio  # loaded: this runs on its loop (the controller imports none)

                    await asyncio.sleep(arg)
            except (
                BaseException
            ) as exc:  # a cancellation too: the loop's clean-ups run, then it goes on up
                error = exc


def _seen(request: Any, body: bytes, status: int, start: int, end: int) -> SeenCall:
    """A request's chat-span facts: the response's id and model.

    A JSON answer's, or a stream's first event's.
    """
    found: dict[str, Any] = {}
    text = body[:65536].decode("utf-8", "replace")
    for line in text.splitlines() if text.lstrip().startswith(("data:", "event:")) else [text]:
        line = line[5:].strip() if line.startswith("data:") else line
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict):
                    response = data.get("response")  # the Responses API's stream events wrap it
                    inner: dict[str, Any] = response if isinstance(response, dict) else data
                    found = {
                        k: inner.get(k) for k in ("id", "model") if isinstance(inner.get(k), str)
                    }
                    if found:
                        break
    error = f"HTTP {status}" if status >= 400 else None
    return SeenCall(
        start,
        end,
        found.get("model"),
        response_id=found.get("id"),
        provider=_host(request),
        error=error,
    )


def _waiting(trial: TrialTraffic | None, what: str) -> contextlib.AbstractContextManager[None]:
    """``trial.waiting(what)``; nothing for the pace alone (no trial scope)."""
    return trial.waiting(what) if trial is not None else contextlib.nullcontext()


def _paced(request: Any, attempt: int) -> str:
    """What a request held by the pace waits for.

    A retry's (after a 429, the run's cool-down), or its budgets.
    """
    return (
        f"a retry of {request.method} {scrub_url(str(request.url))} (the run's pace)"
        if attempt
        else PACED
    )


def _host(request: Any) -> str:
    url = request.url
    return f"{url.host}:{url.port}" if url.port else str(url.host)


def _key(request: Any) -> str:
    """The request as its client's own retry sends it again: method, URL and body."""
    digest = hashlib.sha256(request.content or b"")
    return f"{request.method} {request.url} {digest.hexdigest()}"


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


# -- installing the hook
# -------------------------------------------------------------------------------------

_ACTIVE: list[Traffic] = []
_PATCHED: list[tuple[type, str, Any]] = []
_HOOKED: set[int] = set()


def install(traffic: Traffic) -> None:
    """Route every ``httpx``/``httpx2`` transport request through ``traffic`` (until ``uninstall``).

    Imports neither: those loaded are hooked now. Watching, one the process imports later is
    hooked as its import ends (``_HookOnImport``); the pace alone (no traffic option) hooks those
    the agents load at each case (``adopt``). (httpx's import loads its command line's ``rich`` and
    ``click``: 0.1-0.2 s of a process's start, for an agent whose client is httpx2.)
    """
    _ACTIVE[:] = [traffic]
    if traffic.settings.watch and not any(isinstance(f, _HookOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _HookOnImport())
    adopt()


def adopt() -> None:
    """Hook ``httpx``/``httpx2`` where loaded and not hooked yet.

    httpx2's ``alias_httpx()`` makes both one.
    """
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is None or id(module) in _HOOKED:
            continue
        _HOOKED.add(id(module))
        _patch(
            module.HTTPTransport,
            "handle_request",
            _sync_hook(module, module.HTTPTransport.handle_request),
        )
        _patch(
            module.AsyncHTTPTransport,
            "handle_async_request",
            _async_hook(module, module.AsyncHTTPTransport.handle_async_request),
        )


def uninstall() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _HookOnImport)]
    while _PATCHED:
        cls, name, original = _PATCHED.pop()
        setattr(cls, name, original)
    _HOOKED.clear()
    _ACTIVE.clear()


class _HookOnImport:
    """A ``sys.meta_path`` finder: an ``httpx``/``httpx2`` imported while watching is hooked.

    Its module is loaded by its own loader, then hooked (``adopt``) before the import returns.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _CLIENTS:
            return None
        finders = sys.meta_path
        after = next((n + 1 for n, f in enumerate(finders) if f is self), len(finders))
        for finder in finders[after:]:  # the finders that would have found it
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Adopting(spec.loader)
                return spec
        return None


class _Adopting:
    """The client module's own loader, then ``adopt``: the module keeps its own loader."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        self.loader.exec_module(module)
        adopt()


_CLIENTS = frozenset({"httpx", "httpx2"})


def _patch(cls: type, name: str, replacement: Any) -> None:
    _PATCHED.append((cls, name, cls.__dict__[name]))
    setattr(cls, name, replacement)


def _sync_hook(module: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    def handle_request(self: Any, request: Any) -> Any:
        trial = CURRENT.get()
        if not _ACTIVE or (trial is None and (_ACTIVE[0].settings.watch or TRIAL.get() is None)):
            return original(self, request)  # outside a case (or the hook's case scope): untouched
        return _ACTIVE[0].handle(module, request, lambda r: original(self, r), trial)

    return handle_request


def _async_hook(
    module: Any, original: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        trial = CURRENT.get()
        if not _ACTIVE or (trial is None and (_ACTIVE[0].settings.watch or TRIAL.get() is None)):
            return await original(self, request)
        return await _ACTIVE[0].handle_async(module, request, lambda r: original(self, r), trial)

    return handle_async_request
