"""Run one case: its trials, the checks and the verdict, also when infrastructure failed under it.

A trial is scripted turns, or a simulated user's conversation. Pure asyncio, no pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_agent_eval.adapters import Agent, is_builtin
from pytest_agent_eval.checks import SPAN_CHECKS, CheckContext, CheckRegistry
from pytest_agent_eval.checks.base import check_name, first_infra_error, in_turn
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import (
    CaseResult,
    CheckResult,
    RunRecord,
    ToolCall,
    TrialResult,
    merged_calls,
)
from pytest_agent_eval.core.trial import TRIAL
from pytest_agent_eval.run import eager
from pytest_agent_eval.run.call import INFRA, call_agent, checked, no_recording, recorded
from pytest_agent_eval.run.settings import RunSettings, TrialRecording
from pytest_agent_eval.run.slots import Slots
from pytest_agent_eval.run.stalls import CALL

if TYPE_CHECKING:
    from pytest_agent_eval.traces.engine import Tracing, TrialTrace

T = TypeVar("T")


def weighted_score(
    results: list[CheckResult], weights: dict[str, float], violations: int = 0
) -> float:
    """The weighted mean score of the scored checks.

    Each violation counts as a failed item of weight 1.
    """
    scored = [(r.score, weights.get(r.name, 1.0)) for r in results if r.scored] + [
        (0.0, 1.0)
    ] * violations
    total = sum(w for _, w in scored)
    return sum(s * w for s, w in scored) / total if total else 1.0


def _require_llm(results: list[CheckResult], checks: CheckRegistry) -> None:
    """Turn the LLM checks left unscored for want of an LLM into failures.

    For ``--agent-eval-require-llm``.
    """
    for result in results:
        if not result.scored and checks.uses_llm([check_name(result.name)]):
            result.passed, result.scored = False, True
            result.message = f"needs an LLM (--agent-eval-require-llm): {result.message}"


async def run_trial(case: Case, agent: Agent, settings: RunSettings, trial: int = 0) -> TrialResult:
    """One independent run of the case (all its turns), checked.

    Traced when the run traces or the case checks spans (SPEC §23): the trial's root span current
    around the agent call, its spans in the run record.
    """
    TRIAL.set((case.id, trial))  # this trial's task only: gather runs each trial in its own context
    tracing = settings.tracing
    if tracing is None and wants_spans(
        case
    ):  # `expect: spans:` captures its case's spans without a trace option
        from pytest_agent_eval.traces.engine import capture_only

        tracing = capture_only()
    if tracing is None:
        return await _trial(case, agent, settings, trial, None)
    trace = tracing.start(agent.name, case.id, str(case.path), trial, case.query or "")
    result = await _trial(case, agent, settings, trial, (tracing, trace))
    if result.run.spans is None:  # a simulated user's conversation: its spans as they are
        _traced(result.run, tracing, trace)
    tracing.finish(trace, result.run.output, result.run.error, result.checks)
    return result


def wants_spans(case: Case) -> bool:
    """Whether a check of the case reads spans.

    Those are ``spans``, ``no_error_spans`` and ``max_llm_calls``.
    """
    return not SPAN_CHECKS.isdisjoint(case.expect) or any(
        not SPAN_CHECKS.isdisjoint(turn.expect) for turn in case.turns
    )


def _traced(run: RunRecord, tracing: Tracing, trace: TrialTrace) -> None:
    """Add the trial's spans and trace to ``run``.

    The trial's chat spans (its LLM requests) and tool spans (its tool calls) are added; its span
    tree and trace id into ``run``; the tool calls read from the agent's ``execute_tool`` spans when
    nothing else recorded any.
    """
    from pytest_agent_eval.traces.tree import is_ours, tool_call_of
    from pytest_agent_eval.traffic.scope import CURRENT

    traffic = CURRENT.get()
    tracing.add_calls(trace, (traffic.calls or []) if traffic is not None else [], run.tool_calls)
    run.trace_id = trace.trace_id
    run.spans = tracing.spans(trace)
    if (
        not run.tool_calls
    ):  # no adapter and no mocks told the calls: the agent's own spans do (any framework)
        for span in run.spans:
            call = None if is_ours(span) else tool_call_of(span)
            if call is not None:
                run.tool_calls.append(ToolCall(*call))


async def _trial(
    case: Case,
    agent: Agent,
    settings: RunSettings,
    trial: int,
    traced: tuple[Tracing, TrialTrace] | None,
) -> TrialResult:
    """The trial; ``traced``: the run's tracing and this trial's trace."""
    if (
        case.simulated_user is not None
    ):  # a simulated user converses instead of scripted turns (conversation/)
        from pytest_agent_eval.run.conversation import run_conversation_trial

        with traced[0].activate(traced[1]) if traced else contextlib.nullcontext():
            return await run_conversation_trial(case, agent, settings, trial)
    ctx = CheckContext(case=case, options=case.expect_options, llm=settings.llm)
    recorder = settings.recorder(case) if settings.recorder else no_recording(case)
    turn_results: list[CheckResult] = []
    with (
        recorder as recording,
        traced[0].activate(traced[1]) if traced else contextlib.nullcontext(),
    ):
        if case.turns:
            run = await _conversation(case, agent, settings, ctx, turn_results, recording)
        else:
            run = await call_agent(case, agent, case.query, dict(case.context), settings)
    violations = recorded(run, recording)
    if traced is not None:
        _traced(run, *traced)
    reasons = list(violations)
    if run.error:
        return TrialResult(run, turn_results, False, 0.0, [run.error, *reasons], violations)
    results = turn_results + await checked(run, case.expect, ctx, settings)
    infra = first_infra_error(results)
    if (
        infra is not None
    ):  # a check's own LLM request failed on infrastructure: no verdict, and not the agent's
        result = _infrastructure(TrialResult(run, results, False, 0.0, [], violations), infra)
        result.reasons += reasons
        return result
    if settings.require_llm and settings.llm is None:
        _require_llm(results, settings.checks)
    if not case.expect and not any(
        turn.expect for turn in case.turns
    ):  # nothing to check: that it answered
        from pytest_agent_eval.checks.answers import answered

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
    if (
        case.min_score is not None and errors
    ):  # a check without a verdict is never a pass, whatever the score
        passed = False
        reasons.extend(f"{r.name}: {r.message}" for r in errors)
    return TrialResult(run, results, passed and not violations, score, reasons, violations)


async def _conversation(
    case: Case,
    agent: Agent,
    settings: RunSettings,
    ctx: CheckContext,
    turn_results: list[CheckResult],
    recording: TrialRecording | None = None,
) -> RunRecord:
    """Scripted turns: each user message with the history so far.

    Per-turn checks are named ``turn N: check``. A turn's checks see the tool calls the trial's
    ``recording`` got during the turn beside those the agent reported (an agent that reports none,
    such as one on an MCP session, included).
    """
    history: list[dict[str, Any]] = []
    whole = RunRecord()
    for n, turn in enumerate(case.turns, 1):
        context = {**case.context, "history": list(history)}
        mark = len(recording.calls) if recording is not None else 0
        run = await call_agent(case, agent, turn.message, context, settings, whole.conversation)
        whole.add_turn(run)
        history += [
            {"role": "user", "content": turn.message},
            {"role": "assistant", "content": run.output},
        ]
        if run.error:
            whole.error = f"turn {n}: {run.error}"
            whole.traceback = run.traceback
            whole.infra_error = run.infra_error
            break
        seen = run
        if recording is not None and len(recording.calls) > mark:
            calls = merged_calls(run.tool_calls, recording.calls[mark:])
            seen = dataclasses.replace(run, tool_calls=calls)
        for result in await checked(seen, turn.expect, ctx, settings):
            result.name = in_turn(n, result.name)
            turn_results.append(result)
    whole.history = history
    return whole


def passes_needed(trials: int, min_pass_rate: float) -> int:
    """The passing trials a case of ``trials`` trials needs: ⌈``min_pass_rate`` · ``trials``⌉.

    A rate a float cannot hold exactly (0.7 · 10 = 7.000000000000001) still needs 7.
    """
    return max(0, math.ceil(min_pass_rate * trials - 1e-9))


def next_wave(passes: int, fails: int, trials: int, min_pass_rate: float) -> int:
    """How many more trials an adaptive case starts at once.

    None when its verdict is decided (enough passes, or too many failures for enough), else as many
    as must all come back before it can be (the fewer of the passes still needed and the failures
    that would end it), so no trial runs that the verdict did not need.
    """
    need = passes_needed(trials, min_pass_rate)
    if passes + fails == 0:
        return max(1, min(need, trials - need + 1))
    allowed = trials - need  # failures the case can take and still pass
    if passes >= need or fails > allowed:
        return 0
    return min(need - passes, allowed - fails + 1)


async def in_waves(more: Callable[[list[T]], int], run: Callable[[int], Awaitable[T]]) -> list[T]:
    """Trials in waves, each wave's concurrently.

    ``more(done)`` says how many to start next (0: done).
    """
    import asyncio  # several trials run on the loop (``needs_loop``): loaded by then

    done: list[T] = []
    while (count := more(done)) > 0:
        start = len(done)
        done += await asyncio.gather(*(run(n) for n in range(start, start + count)))
    return done


async def run_case(
    case: Case, agent: Agent, settings: RunSettings, *, loop_free: bool | None = None
) -> CaseResult:
    """All trials of the case (``repeat``), concurrently within the limit; the pass rate decides.

    An adaptive case (``repeat: {max, stop: decided}``) runs them in waves until its verdict is the
    one all would give. ``loop_free``: whether a trial needs no loop, when the caller found out
    already (``case_run``); ``None``: found out here.
    """
    repeat = settings.repeat or case.repeat
    cassette = None
    timeout = case.timeout if case.timeout is not None else settings.default_timeout
    CALL.set((case, timeout))
    more: Callable[[list[TrialResult]], int] | None = None
    if case.stop_when_decided:

        def more(done: list[TrialResult]) -> int:
            passes = sum(t.passed for t in done)
            return next_wave(passes, len(done) - passes, repeat, case.min_pass_rate)

    if loop_free is None:
        loop_free = _loop_free(case, agent, settings)
    if not (repeat == 1 and more is None and timeout is None and loop_free):
        await (
            eager.needs_loop()
        )  # when started outside the loop (InlineLoop): the rest of the run goes on on it
    if settings.traffic is not None and settings.traffic.watching:
        trials, cassette = await _trials_under_traffic(case, agent, settings, repeat, more)
    else:
        trials = await _trials(repeat, lambda n: run_trial(case, agent, settings, n), more)
    score = sum(t.score for t in trials) / len(trials)
    if more is not None:  # the verdict all ``repeat`` trials would give: enough of them pass
        passed = sum(t.passed for t in trials) >= passes_needed(repeat, case.min_pass_rate)
        return CaseResult(case, trials, passed, score, cassette, trials_max=repeat)
    rate = sum(t.passed for t in trials) / len(trials)
    return CaseResult(case, trials, rate >= case.min_pass_rate, score, cassette)


async def _trials(
    repeat: int,
    trial: Callable[[int], Awaitable[TrialResult]],
    more: Callable[[list[TrialResult]], int] | None = None,
) -> list[TrialResult]:
    """The case's trials, concurrently (an adaptive case's in waves, ``more``).

    One trial runs in this task (no task, future and loop turns of a gather, so a sync agent's trial
    needs no loop: ``eager``).
    """
    if more is not None:
        return await in_waves(more, trial)
    if repeat == 1:
        return [await trial(0)]
    import asyncio  # several trials run on the loop (``needs_loop``): loaded by then

    return list(await asyncio.gather(*(trial(n) for n in range(repeat))))


async def _trials_under_traffic(
    case: Case,
    agent: Agent,
    settings: RunSettings,
    repeat: int,
    more: Callable[[list[TrialResult]], int] | None = None,
) -> tuple[list[TrialResult], tuple[str, str] | None]:
    """The case's trials, each in its own traffic scope, then its cassette written.

    On an xdist worker the cassette is returned to be carried to the controller. A cassette that
    cannot be read or written, a request that failed on infrastructure (refused, 429/5xx after
    retries, a replay miss): the trial is that error, whatever the agent made of it.
    """
    from pytest_agent_eval.traffic.cassette import CassetteError
    from pytest_agent_eval.traffic.hook import CassetteNotWritten
    from pytest_agent_eval.traffic.scope import cassette_error_text

    traffic = settings.traffic
    assert traffic is not None
    try:
        scope = traffic.case(case)
    except CassetteError as exc:  # the agent is not run when its cassette cannot be read
        return [_infrastructure(None, cassette_error_text(exc, traffic.settings.root))], None

    async def one(n: int) -> TrialResult:
        with traffic.trial(scope) as requests:
            result = await run_trial(case, agent, settings, n)
        infra = requests.report(result.run)
        return result if infra is None else _infrastructure(result, infra)

    trials = await _trials(repeat, one, more)
    try:
        return trials, traffic.finish(scope)
    except CassetteNotWritten as exc:
        return [_infrastructure(t, str(exc)) for t in trials], None


def _infrastructure(result: TrialResult | None, message: str) -> TrialResult:
    """``result`` made an infrastructure error saying ``message``, whatever the agent made of it.

    A ``None`` result is a trial that never ran.
    """
    result = result or TrialResult(RunRecord(), [], False, 0.0)
    result.run.infra_error = message
    result.run.error = f"{INFRA}{message}"
    result.passed = False
    result.reasons = [result.run.error]
    return result


def case_run(case: Case, agent: Agent, settings: RunSettings) -> Coroutine[Any, Any, CaseResult]:
    """The case's run (``run_case``): in a worker thread from start to end where it needs no loop.

    Under the background loop's limit (``Slots``), a run that never waits on the loop (one trial, no
    timeout, a loop-free trial) is an ``eager.OffLoop``. One that records tool mocks, traces, or
    watches HTTP traffic stays on the loop, where it always ran.
    """
    if not isinstance(settings.limit, Slots) or settings.inline:
        return run_case(case, agent, settings)
    timeout = case.timeout if case.timeout is not None else settings.default_timeout
    if (
        timeout is None
        and (settings.repeat or case.repeat) == 1
        and not case.stop_when_decided
        and not case.tool_mocks
        and settings.tracing is None
        and (settings.traffic is None or not settings.traffic.watching)
        and not wants_spans(case)
        and _needs_no_loop(case, agent, settings)
    ):
        settings.inline = True  # its blocking calls in its own thread: it holds no loop up
        return eager.OffLoop(run_case(case, agent, settings, loop_free=True))
    return run_case(case, agent, settings)


def _loop_free(case: Case, agent: Agent, settings: RunSettings) -> bool:
    """Whether a trial of the case never waits on the loop and runs the same without one.

    That takes a sync agent called in this thread (its HTTP requests through the traffic layer's
    sync path) and read by a built-in adapter, checks that are built-in or run off the loop anyway,
    and no simulated user nor concurrency limit that needs the loop.
    """
    return (
        settings.inline
        and (settings.limit is None or isinstance(settings.limit, Slots))
        and _needs_no_loop(case, agent, settings)
    )


def _needs_no_loop(case: Case, agent: Agent, settings: RunSettings) -> bool:
    checks = settings.checks
    return (
        not agent.is_async
        and case.simulated_user is None
        and is_builtin(agent.adapter)
        and checks.need_no_loop(case.expect)
        and all(checks.need_no_loop(turn.expect) for turn in case.turns)
    )
