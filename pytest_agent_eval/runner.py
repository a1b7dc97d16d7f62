"""Run one case: its trials (and turns), the timeout, the checks and the verdict. Pure asyncio, no pytest."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pytest_agent_eval import eager
from pytest_agent_eval.adapters import Agent, UnreadableResult, is_builtin
from pytest_agent_eval.adapters.base import TRIAL
from pytest_agent_eval.agents import invoke
from pytest_agent_eval.blocking import in_thread, outside_loop
from pytest_agent_eval.cases.model import Case
from pytest_agent_eval.checks import CheckContext, CheckRegistry, CheckResult, evaluate
from pytest_agent_eval.checks.answers import answered
from pytest_agent_eval.checks.base import first_infra_error
from pytest_agent_eval.faults import describe, original
from pytest_agent_eval.record import RunRecord, ToolCall
from pytest_agent_eval.stalls import CALL, LoopBlocked, Stall, blocked_message, running_step

if TYPE_CHECKING:
    from pytest_agent_eval.traffic.hook import Traffic

T = TypeVar("T")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class TrialRecording(Protocol):
    """What tool mocks recorded during one trial."""

    calls: list[ToolCall]
    violations: list[str]
    """Problems that fail the trial whatever the agent did with them (e.g. an unmocked tool in strict mode)."""
    unused: list[str]
    """Declared mocks that no call used: a problem only when the agent answered."""


RecorderFactory = Callable[[Case], AbstractContextManager[TrialRecording]]


@dataclass
class RunSettings:
    """What every case run needs besides the case and the agent."""

    checks: CheckRegistry
    default_timeout: float | None = None
    llm: Callable[..., str] | None = None
    recorder: RecorderFactory | None = None
    limit: asyncio.Semaphore | None = None
    """Bounds agent calls in flight across cases and trials (created on the runner's loop)."""
    repeat: int | None = None
    """Trials per case for every case (``--agent-eval-repeat``), instead of each case's ``repeat``."""
    require_llm: bool = False
    """``--agent-eval-require-llm``: a check that needs an LLM fails when there is none, instead of 'not scored'."""
    inline: bool = False
    """Blocking calls without a timeout run in the loop's own thread: set when the loop runs one case at a time."""
    traffic: Traffic | None = None
    """The HTTP traffic hook's session (usage, cassettes, rate limits, retries), when an option turned it on."""
    assertion_hook: Callable[..., Any] | None = None
    """Conversations: ``pytest_agent_eval_evaluate_assertion(assertion, run, case)`` for ``expression`` assertions."""
    neo4j: Any = None
    """Conversations: the ``agent_eval_neo4j`` fixture's driver for Cypher (``None``: from the environment)."""


@dataclass
class TrialResult:
    """One trial: the run record, every check's result and the verdict."""

    run: RunRecord
    checks: list[CheckResult]
    passed: bool
    score: float
    reasons: list[str] = field(default_factory=list)
    """Why the trial failed, one line each."""
    violations: list[str] = field(default_factory=list)
    """Failures not tied to a check, e.g. a call to an unmocked tool in strict mode."""
    summary: str | None = None
    """The failure's one-line summary when the trial's own verdict says it best (a conversation's composite)."""
    parts: dict[str, str] = field(default_factory=dict)
    """A conversation's score parts for reports (``timing``, ``tasks``, ``assertions``, ``penalty``, ``ended``)."""

    @property
    def scored(self) -> bool:
        """Whether ``score`` is a real score: no check is without a verdict, and something was scored."""
        if any(c.error for c in self.checks):
            return False
        return bool(self.run.error or self.violations or any(c.scored for c in self.checks))


@dataclass
class CaseResult:
    """A case's verdict over all its trials."""

    case: Case
    trials: list[TrialResult]
    passed: bool
    score: float
    pass_rate: float

    @property
    def first(self) -> TrialResult:
        """The trial to show: the first failing one, else the first."""
        return next((t for t in self.trials if not t.passed), self.trials[0])

    @property
    def passes(self) -> int:
        return sum(t.passed for t in self.trials)

    @property
    def unscored(self) -> list[CheckResult]:
        """The checks, when there are some and none of them could be scored (e.g. LLM checks without an LLM)."""
        checks = [c for t in self.trials for c in t.checks]
        return [] if any(c.scored for c in checks) else checks


def agent_traceback(exc: BaseException) -> str:
    """The exception with its traceback from the agent's own frames (the plugin's and asyncio's left out)."""
    exc = original(exc)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(_PACKAGE_DIR)
        and f"{os.sep}asyncio{os.sep}" not in f.filename
        and not f.filename.endswith(("threading.py", "concurrent/futures/thread.py"))
    ]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def agent_error(exc: BaseException) -> str:
    """What the agent did: ``agent raised Type: message``, or ``agent called sys.exit(3)``."""
    if isinstance(exc, LoopBlocked):
        return str(exc)
    verb = "called" if isinstance(original(exc), SystemExit) else "raised"
    return f"agent {verb} {describe(exc)}"


async def _guarded(agent: Agent, query: str, context: dict[str, Any], inline: bool) -> tuple[Any, Exception | None]:
    """The agent's result, or the exception it raised: an agent's own ``TimeoutError`` is not the timeout's.

    The call's coroutine is made here, once this one runs: a case cancelled before its timeout's task started
    (its loop abandoned) leaves no coroutine that was never awaited."""
    try:
        return await invoke(agent, query, context, inline=inline), None
    except Exception as exc:
        return None, exc


async def _call(case: Case, agent: Agent, query: str, context: dict[str, Any], settings: RunSettings) -> RunRecord:
    """One agent call, bounded by the concurrency limit and the timeout, timed, normalised."""
    timeout = case.timeout if case.timeout is not None else settings.default_timeout
    async with settings.limit if settings.limit is not None else contextlib.nullcontext():
        start = time.perf_counter()
        call = _guarded(agent, query, context, settings.inline and timeout is None)
        if timeout is None:
            raw, exc = await call
        else:
            try:
                raw, exc = await asyncio.wait_for(call, timeout)
            except (asyncio.TimeoutError, TimeoutError):  # only the deadline: the agent's own errors are in `exc`
                return RunRecord(
                    latency_s=time.perf_counter() - start,
                    error=f"agent did not answer within {timeout:g} s (timeout of case {case.id})",
                )
        latency = time.perf_counter() - start
    if exc is not None:
        return _failed(exc, latency)
    try:
        record = agent.adapter.normalise(raw)
    except UnreadableResult as exc:
        return RunRecord(latency_s=latency, error=str(exc))
    except Exception as exc:
        return RunRecord(latency_s=latency, error=f"cannot read the agent's result: {describe(exc)}")
    record.latency_s = latency
    return record


def _failed(exc: Exception, latency: float) -> RunRecord:
    """The record of a call that raised: the agent's error, or infrastructure's (a known LLM client's exception)."""
    from pytest_agent_eval.traffic.clients import infrastructure_error  # on an error only

    infra = infrastructure_error(exc)
    error = agent_error(exc) if infra is None else f"infrastructure error (not the agent's): {infra}"
    return RunRecord(latency_s=latency, error=error, traceback=agent_traceback(exc), infra_error=infra)


async def _checked(
    run: RunRecord, expect: dict[str, Any], ctx: CheckContext, settings: RunSettings
) -> list[CheckResult]:
    """``evaluate``, off the loop when a check declares it may block (user code, the LLM, I/O)."""
    args = (run, expect, ctx, settings.checks)
    if not settings.checks.blocking(expect):
        return evaluate(*args)
    results: list[CheckResult] = outside_loop(evaluate, *args) if settings.inline else await in_thread(evaluate, *args)
    return results


def weighted_score(results: list[CheckResult], weights: dict[str, float], violations: int = 0) -> float:
    """The weighted mean score of the scored checks; each violation counts as a failed item of weight 1."""
    scored = [(r.score, weights.get(r.name, 1.0)) for r in results if r.scored] + [(0.0, 1.0)] * violations
    total = sum(w for _, w in scored)
    return sum(s * w for s, w in scored) / total if total else 1.0


@contextlib.contextmanager
def _no_recording(case: Case) -> Iterator[None]:
    yield None


def _require_llm(results: list[CheckResult], checks: CheckRegistry) -> None:
    """Turn the LLM checks left unscored for want of an LLM into failures (``--agent-eval-require-llm``)."""
    for result in results:
        if not result.scored and checks.uses_llm([result.name.rpartition(": ")[2]]):
            result.passed, result.scored = False, True
            result.message = f"needs an LLM (--agent-eval-require-llm): {result.message}"


async def run_trial(case: Case, agent: Agent, settings: RunSettings, trial: int = 0) -> TrialResult:
    """One independent run of the case (all its turns), checked."""
    TRIAL.set((case.id, trial))  # this trial's task only: gather runs each trial in its own context
    if case.simulated_user is not None:  # a simulated user converses instead of scripted turns (conversation/)
        from pytest_agent_eval.conversation.run import RunnerParts, run_conversation_trial

        parts = RunnerParts(call=_call, checked=_checked, no_recording=_no_recording, trial_result=TrialResult)
        return await run_conversation_trial(case, agent, settings, trial, parts)
    ctx = CheckContext(case=case, options=case.expect_options, llm=settings.llm)
    recorder = settings.recorder(case) if settings.recorder else _no_recording(case)
    turn_results: list[CheckResult] = []
    with recorder as recording:
        if case.turns:
            run = await _conversation(case, agent, settings, ctx, turn_results)
        else:
            run = await _call(case, agent, case.query, dict(case.context), settings)
    violations: list[str] = []
    if recording is not None:
        if recording.calls or not run.tool_calls:
            run.tool_calls = list(recording.calls)  # mocks saw every call: authoritative
        violations.extend(recording.violations)
        if not run.error:  # an agent that failed early had no chance to call them
            violations.extend(recording.unused)
    reasons = list(violations)
    if run.error:
        return TrialResult(run, turn_results, False, 0.0, [run.error, *reasons], violations)
    results = turn_results + await _checked(run, case.expect, ctx, settings)
    infra = first_infra_error(results)
    if infra is not None:  # a check's own LLM request failed on infrastructure: no verdict, and not the agent's
        run.infra_error = infra
        run.error = f"infrastructure error (not the agent's): {infra}"
        return TrialResult(run, results, False, 0.0, [run.error, *reasons], violations)
    if settings.require_llm and settings.llm is None:
        _require_llm(results, settings.checks)
    if not case.expect and not any(turn.expect for turn in case.turns):  # nothing to check: that it answered
        results.append(answered(run, True, ctx))
    score = weighted_score(results, case.weights, len(violations))
    if case.min_score is not None:
        passed = score >= case.min_score
        if not passed:
            reasons.append(f"score {score:.2f} below min_score {case.min_score:g}")
    else:
        failed = [r for r in results if not r.passed]
        passed = not failed
        reasons.extend(f"{r.name}: {r.message or 'failed'}" for r in failed)
    errors = [r for r in results if r.error]
    if case.min_score is not None and errors:  # a check without a verdict is never a pass, whatever the score
        passed = False
        reasons.extend(f"{r.name}: {r.message}" for r in errors)
    return TrialResult(run, results, passed and not violations, score, reasons, violations)


async def _conversation(
    case: Case, agent: Agent, settings: RunSettings, ctx: CheckContext, turn_results: list[CheckResult]
) -> RunRecord:
    """Scripted turns: each user message with the history so far; per-turn checks are named ``turn N: check``."""
    history: list[dict[str, Any]] = []
    whole = RunRecord()
    for n, turn in enumerate(case.turns, 1):
        context = {**case.context, "history": list(history)}
        run = await _call(case, agent, turn.message, context, settings)
        whole.latency_s += run.latency_s
        whole.tool_calls.extend(run.tool_calls)
        history += [{"role": "user", "content": turn.message}, {"role": "assistant", "content": run.output}]
        whole.output, whole.reasoning = run.output, run.reasoning
        if run.error:
            whole.error = f"turn {n}: {run.error}"
            whole.traceback = run.traceback
            whole.infra_error = run.infra_error
            break
        for result in await _checked(run, turn.expect, ctx, settings):
            result.name = f"turn {n}: {result.name}"
            turn_results.append(result)
    whole.history = history
    return whole


async def run_case(case: Case, agent: Agent, settings: RunSettings) -> CaseResult:
    """All trials of the case (``repeat``), concurrently within the limit; the pass rate decides."""
    repeat = settings.repeat or case.repeat
    timeout = case.timeout if case.timeout is not None else settings.default_timeout
    CALL.set((case, timeout))
    if not (repeat == 1 and timeout is None and _loop_free(case, agent, settings)):
        await eager.needs_loop()  # when started outside the loop (InlineLoop): the rest of the run goes on on it
    if settings.traffic is not None:
        trials = await settings.traffic.run_trials(case, repeat, lambda n: run_trial(case, agent, settings, n))
    elif repeat == 1:  # in this task: no task, future and loop turns of a gather per case
        trials = [await run_trial(case, agent, settings)]
    else:
        trials = list(await asyncio.gather(*(run_trial(case, agent, settings, n) for n in range(repeat))))
    passes = sum(t.passed for t in trials)
    rate = passes / len(trials)
    score = sum(t.score for t in trials) / len(trials)
    return CaseResult(case, trials, rate >= case.min_pass_rate, score, rate)


def _loop_free(case: Case, agent: Agent, settings: RunSettings) -> bool:
    """Whether a trial of the case never waits on the loop and runs the same without one: a sync agent called in
    this thread (its HTTP requests through the traffic layer's sync path) and read by a built-in adapter, checks
    that are built-in or run off the loop anyway, and no concurrency limit or simulated user."""
    checks = settings.checks
    return (
        settings.inline
        and not agent.is_async
        and settings.limit is None
        and case.simulated_user is None
        and is_builtin(agent.adapter)
        and checks.need_no_loop(case.expect)
        and all(checks.need_no_loop(turn.expect) for turn in case.turns)
    )


class InlineLoop:
    """An event loop in the calling (main) thread that runs one case at a time: no hand-off between threads.

    For concurrency 1. A signal (Ctrl-C, pytest-timeout) lands in the running case itself. A case starts outside
    the loop and goes on as a task on it only where it needs it (``eager``): most never do.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        started = eager.start(coro)  # a case that never waits ends here, without a turn of the loop
        if isinstance(started, eager.Finished):
            return started.value
        task = self.loop.create_task(started.rest())
        try:
            return self.loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # interrupted while the case was waiting: stop it before going on
                task.cancel()
                with contextlib.suppress(BaseException):
                    self.loop.run_until_complete(task)
            with contextlib.suppress(BaseException):  # stopped before the task's first step, the run never resumed:
                started.context.run(started.coro.close)  # its cleanups (a tool-mock recording) run in its context
            raise

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.loop.run_until_complete(_cancel_pending())
        self.loop.close()


class LoopThread:
    """A background event loop that runs case coroutines while pytest runs items in the main thread."""

    BEAT = 0.05
    """Seconds between the loop's heartbeats: a loop that misses them is blocked."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._beat = time.monotonic()
        self._thread = threading.Thread(target=self.loop.run_forever, name="agent-eval-loop", daemon=True)
        self._thread.start()
        self.loop.call_soon_threadsafe(self._heartbeat)

    def _heartbeat(self) -> None:
        self._beat = time.monotonic()
        self.loop.call_later(self.BEAT, self._heartbeat)

    def blocked(self) -> Stall:
        """How long the loop has not turned, and the case whose agent holds it (if an agent does)."""
        now = time.monotonic()
        step = running_step(self._thread)
        if step is not None:  # an agent's step runs on the loop now: it holds the loop
            return Stall(now - step.started, step.case)
        return Stall(max(0.0, now - self._beat - self.BEAT), None)

    def wait_case(
        self, future: concurrent.futures.Future[CaseResult], case: Case, timeout: float | None
    ) -> CaseResult | Stall:
        """The case's result; or what blocks the loop, when an agent holds it for longer than its own case's timeout
        (``timeout`` if that case sets none), or something else for longer than this case's: no timeout on the loop
        can fire meanwhile. This case is cancelled then.

        Looked at also while waiting for a case without a timeout: another case's agent may block the loop then,
        and the timeouts of every case in flight would run out behind it."""
        own = case.timeout if case.timeout is not None else timeout
        while True:
            try:
                return future.result(timeout=0.1 if own is None else min(own, 0.1))
            except concurrent.futures.TimeoutError:
                pass
            except BaseException:
                future.cancel()
                raise
            stall = self.blocked()
            culprit = stall.culprit
            # an agent holds the loop: its own case's limit, whichever case is waited for; else this case's
            allowed = own if culprit is None else culprit.timeout if culprit.timeout is not None else timeout
            if allowed is not None and stall.seconds > allowed:
                future.cancel()  # its task is cancelled if the loop turns again
                return stall

    def abandon(self) -> None:
        """Leave this (blocked) loop: what runs on it is cancelled and it stops if it ever turns again; its thread,
        a daemon, cannot be stopped from outside."""
        with contextlib.suppress(RuntimeError):
            self.submit(_cancel_pending_then_stop())

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for it here."""
        return wait(self.submit(coro))

    def semaphore(self, limit: int) -> asyncio.Semaphore:
        """A semaphore bound to this loop."""
        return self.submit(_make_semaphore(limit)).result()

    def close(self) -> None:
        """Cancel what is still running (cases started early and never needed), then stop the loop."""
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.submit(_cancel_pending()).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


def blocked_result(case: Case, stall: Stall, limit: float | None) -> CaseResult:
    """The failure of a case that blocked the event loop (``stall.culprit``), or that could not answer while
    something other than an agent blocked it."""
    if stall.culprit is case:
        error = blocked_message(case, stall.seconds, limit, ongoing=True)
    else:
        error = f"agent did not answer within {limit:g} s: the event loop was blocked for {stall.seconds:.1f} s"
    trial = TrialResult(RunRecord(latency_s=stall.seconds, error=error), [], False, 0.0, [error])
    return CaseResult(case, [trial], False, 0.0, 0.0)


def wait(future: concurrent.futures.Future[T]) -> T:
    """The future's result; when the wait is interrupted (Ctrl-C, pytest-timeout), its case is stopped too."""
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


async def _cancel_pending() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _cancel_pending_then_stop() -> None:
    """Cancel what runs on this loop, let it finish (its context managers exit in their own tasks), then stop."""
    await _cancel_pending()
    asyncio.get_running_loop().stop()


async def _make_semaphore(limit: int) -> asyncio.Semaphore:
    return asyncio.Semaphore(limit)
