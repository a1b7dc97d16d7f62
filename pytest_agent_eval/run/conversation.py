"""One trial of a simulated-user case: setups, conversation, scores, assertions and verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_agent_eval.checks.base import CheckContext, first_infra_error
from pytest_agent_eval.conversation.assertions import assertion_part, evaluate_assertions
from pytest_agent_eval.conversation.neo4j import Connection, NotConfigured
from pytest_agent_eval.conversation.scoring import Composite, penalty, score_tasks, timing_score
from pytest_agent_eval.conversation.simulate import Conversation, converse
from pytest_agent_eval.core.conversation import DEFAULT_MIN_SCORE, SimulatedUser
from pytest_agent_eval.core.results import CheckResult, RunRecord, TrialResult
from pytest_agent_eval.run.blocking import in_thread, outside_loop
from pytest_agent_eval.run.call import INFRA, call_agent, checked, no_recording, recorded

if TYPE_CHECKING:
    from pytest_agent_eval.adapters import Agent
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.run.settings import RunSettings


NO_LLM = (
    "no LLM configured for the simulated user: set AGENT_EVAL_LLM_MODEL "
    "(with OPENAI_API_KEY / OPENAI_BASE_URL and "
    "the `openai` extra), or override the `agent_eval_llm` fixture in conftest.py"
)


async def run_conversation_trial(
    case: Case, agent: Agent, settings: RunSettings, trial: int
) -> TrialResult:
    """Converse with the agent as the case's simulated user, then score it (SPEC §9)."""
    user = case.simulated_user
    assert user is not None
    ctx = CheckContext(case=case, options=case.expect_options, llm=settings.llm)
    llm = settings.llm
    if llm is None:
        require = settings.require_llm
        message = (
            f"needs an LLM (--agent-eval-require-llm): {NO_LLM}"
            if require
            else f"not scored: {NO_LLM}"
        )
        check = CheckResult(
            "simulated_user", not require, 0.0, None, "not run", message, scored=require
        )
        return TrialResult(RunRecord(), [check], not require, 0.0, [message])

    async def off_loop(func: Any, *args: Any) -> Any:
        return outside_loop(func, *args) if settings.inline else await in_thread(func, *args)

    async def call(message: str, context: dict[str, Any], conversation: Any) -> RunRecord:
        return await call_agent(case, agent, message, context, settings, conversation)

    connection = Connection(settings.neo4j)
    try:
        setup_error = await off_loop(_setups, user, connection)
        recorder = settings.recorder(case) if settings.recorder else no_recording(case)
        with recorder as recording:
            if setup_error:
                talk = Conversation(RunRecord(error=setup_error), ended="error")
            else:
                talk = await converse(case.id, dict(case.context), user, llm, call, off_loop, trial)
        run = talk.run
        violations = recorded(
            run, recording, unused=False
        )  # a conversation need not use every mock
        if (
            run.error
        ):  # the agent (after its retries), the simulated user or a setup failed: nothing to score
            why = [run.error, *talk.notes, *violations]
            stopped = "the conversation stopped at an error, nothing was scored"
            return TrialResult(run, [], False, 0.0, why, violations, summary=stopped)
        tasks = await off_loop(score_tasks, llm, user, run.history)
        checks = await off_loop(
            evaluate_assertions,
            user.assertions,
            run,
            ctx,
            settings.checks,
            settings.assertion_hook,
            connection,
        )
    finally:
        await off_loop(connection.close)
    expect = await checked(run, case.expect, ctx, settings)
    infra = first_infra_error([*tasks, *checks, *expect])
    if (
        infra is not None
    ):  # the scorer's or a check's own LLM request failed on infrastructure: not the agent's
        run.infra_error = infra
        run.error = f"{INFRA}{infra}"
        return TrialResult(
            run, [*tasks, *checks, *expect], False, 0.0, [run.error, *violations], violations
        )
    return _verdict(case, user, talk, tasks, checks, expect, violations)


def _setups(user: SimulatedUser, connection: Connection) -> str | None:
    """Run the setups' Cypher; the error that stops the conversation, if any."""
    for n, query in enumerate(user.setups, 1):
        try:
            connection.run(query)
        except NotConfigured as exc:
            return f"setup {n} cannot run: {exc}"
        except Exception as exc:
            return f"setup {n} failed: {type(exc).__name__}: {exc}"
    return None


def _verdict(
    case: Case,
    user: SimulatedUser,
    talk: Conversation,
    tasks: list[CheckResult],
    assertions: list[CheckResult],
    expect: list[CheckResult],
    violations: list[str],
) -> TrialResult:
    latencies = talk.agent_latencies
    timing = timing_score(latencies, user.aspirational_latency_s)
    checks: list[CheckResult] = []
    if timing is not None:
        mean = sum(latencies) / len(latencies)
        checks.append(
            CheckResult(
                "timing",
                True,
                timing,
                f"mean response time ≤ {user.aspirational_latency_s:g} s",
                f"{mean:.3f} s over {len(latencies)} responses",
            )
        )
    unscored: list[str] = []
    task_scores = [c.score for c in tasks if c.name.startswith("task ")]
    task_part = sum(task_scores) / len(task_scores) if task_scores else None
    if task_part is None:
        unscored.append(
            f"tasks not scored ({tasks[0].message})" if tasks else "tasks not scored (no tasks)"
        )
    share, passing, total = assertion_part(user.assertions, assertions)
    broken = [c for c in assertions if c.error]
    if broken:
        share = None
        unscored.append(f"assertions no verdict ({len(broken)} could not be evaluated)")
    elif share is None and user.assertions:
        unscored.append("assertions not scored (none could be evaluated)")
    min_score = case.min_score if case.min_score is not None else DEFAULT_MIN_SCORE
    composite = Composite(
        timing,
        task_part,
        share,
        (passing, total),
        penalty(talk.failures),
        user.weights,
        min_score,
        unscored,
        no_verdict=task_part is None or bool(broken),
    )
    if talk.failures:
        calls = f"{talk.failures} failed agent call{'s' if talk.failures > 1 else ''}"
        checks.append(
            CheckResult(
                "penalty",
                False,
                1.0 - composite.penalty,
                "no failed agent calls",
                calls,
                f"{calls}, retried: penalty {composite.penalty:.2f}",
                detail=talk.notes,
            )
        )
    checks += tasks + assertions + expect
    value = composite.value
    summary = composite.line()
    reasons = [composite.line()]
    if talk.ended == "max_turns":
        aborted = f"aborted at max_turns: {user.max_turns} messages"
        summary += f" ({aborted})"
        reasons.append(aborted)
    failed_expect = [c for c in expect if not c.passed]
    errors = [c for c in checks if c.error]
    reasons += [f"{c.name}: {c.message or 'failed'}" for c in failed_expect + errors]
    passed = (
        value is not None
        and value >= min_score
        and not failed_expect
        and not errors
        and not violations
    )
    parts = {
        name: f"{part:.3f}"
        for name, part in (("timing", timing), ("tasks", task_part), ("assertions", share))
        if part is not None
    }
    parts.update(penalty=f"{composite.penalty:.3f}", ended=talk.ended)
    result = TrialResult(
        talk.run, checks, passed, value or 0.0, [*reasons, *violations], violations, summary=summary
    )
    result.parts = parts
    return result
