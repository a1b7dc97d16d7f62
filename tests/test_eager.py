"""A case's run starts off the event loop at concurrency 1 and moves onto it where it needs it.

That is ``run.eager`` and ``run.loops.InlineLoop``: the verdicts, the task and the context are as
on the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.adapters import Adapter, Agent
from pytest_agent_eval.adapters.plain import PlainAdapter
from pytest_agent_eval.checks import CheckRegistry, CheckResult, builtin_registry
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import CaseResult, RunRecord
from pytest_agent_eval.mocks import MockPlan
from pytest_agent_eval.mocks.current import current_recording
from pytest_agent_eval.run import eager
from pytest_agent_eval.run.agents import as_agent
from pytest_agent_eval.run.loops import InlineLoop
from pytest_agent_eval.run.runner import run_case
from pytest_agent_eval.run.settings import RunSettings
from pytest_agent_eval.run.stalls import CALL
from pytest_agent_eval.traffic.hook import Traffic, TrafficSettings
from pytest_agent_eval.traffic.scope import CURRENT

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


@pytest.fixture
def inline() -> Iterator[InlineLoop]:
    runner = InlineLoop()
    yield runner
    runner.close()


def _case(**fields: Any) -> Case:
    return Case(
        id="c",
        path=Path("eval_x.yaml"),
        line=1,
        query="q",
        **{"expect": {"contains": ["yes"]}, **fields},
    )


def _run(
    runner: InlineLoop,
    agent: Any,
    limit: asyncio.Semaphore | None = None,
    traffic: Traffic | None = None,
    checks: CheckRegistry | None = None,
    **fields: Any,
) -> CaseResult:
    """The case's run as an eval item's at concurrency 1: tool calls recorded, lone trials free.

    The calls are recorded through a context variable set and reset around each trial; a lone trial
    has no concurrency limit.
    """
    case = _case(**fields)
    recorder = MockPlan.for_case(case).recorder
    registry = checks or builtin_registry()
    settings = RunSettings(
        checks=registry, inline=True, limit=limit, recorder=recorder, traffic=traffic
    )
    agent = agent if isinstance(agent, Agent) else as_agent(agent)
    return runner.run(run_case(case, agent, settings))


def _verdict(result: CaseResult) -> tuple[bool, list[str | None], list[str]]:
    return (
        result.passed,
        [t.run.output for t in result.trials],
        [r for t in result.trials for r in t.reasons],
    )


def _turns(runner: InlineLoop) -> list[int]:
    """A callback waiting on the loop: it runs at the loop's next turn."""
    turned: list[int] = []
    runner.loop.call_soon(turned.append, 1)
    return turned


def test_a_sync_case_that_never_waits_ends_without_a_turn_of_the_loop(inline: InlineLoop) -> None:
    turned = _turns(inline)
    assert _verdict(_run(inline, lambda q, c: "yes")) == (True, ["yes"], [])
    assert turned == []
    assert _verdict(_run(inline, lambda q, c: "no")) == (
        False,
        ["no"],
        ["contains: output lacks 'yes'"],
    )
    assert turned == []


@pytest.mark.parametrize("repeat", [1, 2])
def test_a_sync_agents_trials_go_through_the_traffic_layer_with_the_loop_only_for_several(
    inline: InlineLoop, tmp_path: Path, repeat: int
) -> None:
    seen: list[Any] = []

    def agent(query: str, context: dict[str, Any]) -> str:
        seen.append(CURRENT.get())  # the trial the traffic hook attributes a request to
        return "yes"

    turned = _turns(inline)
    result = _run(inline, agent, traffic=Traffic(TrafficSettings(root=tmp_path)), repeat=repeat)
    assert _verdict(result) == (True, ["yes"] * repeat, [])
    assert sorted(trial.number for trial in seen) == list(range(1, repeat + 1))
    assert CURRENT.get() is None
    assert turned == ([] if repeat == 1 else [1])


def _in_task() -> str:
    asyncio.get_running_loop()  # raises outside a loop
    return "yes" if asyncio.current_task() is not None else "no task"


async def _async_agent(query: str, context: dict[str, Any]) -> str:
    await asyncio.sleep(0.001)
    return _in_task()


def _returns_awaitable(query: str, context: dict[str, Any]) -> Any:
    return _async_agent(query, context)


def _sync_in_task(query: str, context: dict[str, Any]) -> str:
    return "yes"


@pytest.mark.parametrize(
    ("agent", "fields", "limit"),
    [
        pytest.param(_async_agent, {}, None, id="async agent"),
        pytest.param(_returns_awaitable, {}, None, id="sync agent returning an awaitable"),
        pytest.param(_sync_in_task, {"timeout": 5.0}, None, id="timeout"),
        pytest.param(_sync_in_task, {"repeat": 3}, None, id="repeat"),
        pytest.param(_sync_in_task, {}, "limit", id="concurrency limit"),
    ],
)
def test_what_needs_the_loop_runs_in_a_task_on_it(
    inline: InlineLoop, agent: Any, fields: dict[str, Any], limit: str | None
) -> None:
    turned = _turns(inline)
    result = _run(inline, agent, asyncio.Semaphore(1) if limit else None, **fields)
    assert _verdict(result) == (True, ["yes"] * len(result.trials), [])
    assert len(result.trials) == fields.get("repeat", 1)
    assert turned == [1]


def _plugin_checks(replace_builtin: bool) -> CheckRegistry:
    """The built-in checks, and a plugin's non-blocking check on the loop (``blocking=False``)."""

    def on_loop(run: Any, spec: Any, ctx: Any) -> CheckResult:
        return CheckResult.of("on_loop", _in_task() == "yes")

    registry = builtin_registry()
    registry.register("contains" if replace_builtin else "on_loop", on_loop, {}, blocking=False)
    return registry


class _OwnAdapter(PlainAdapter):
    """A plugin's adapter, whose ``normalise`` was run on the loop."""

    name = "own"

    def normalise(self, raw: Any) -> RunRecord:
        return RunRecord(output=_in_task())


@pytest.mark.parametrize(
    ("checks", "adapter", "expect"),
    [
        pytest.param(
            _plugin_checks(False), None, {"contains": ["yes"], "on_loop": True}, id="plugin check"
        ),
        pytest.param(
            _plugin_checks(True),
            None,
            {"contains": ["yes"]},
            id="plugin check replacing a built-in",
        ),
        pytest.param(None, _OwnAdapter(), {"contains": ["yes"]}, id="plugin adapter"),
    ],
)
def test_a_plugins_check_or_adapter_runs_on_the_loop_as_it_was_promised(
    inline: InlineLoop,
    checks: CheckRegistry | None,
    adapter: Adapter | None,
    expect: dict[str, Any],
) -> None:
    agent: Any = _sync_in_task if adapter is None else adapter.agent(_sync_in_task, "agent")
    turned = _turns(inline)
    assert _verdict(_run(inline, agent, checks=checks, expect=expect)) == (True, ["yes"], [])
    assert turned == [1]


def test_a_plugins_non_blocking_check_sees_the_loop_at_any_concurrency(
    evals: pytest.Pytester,
) -> None:
    evals.makeconftest(
        """
        import asyncio
        from pytest_agent_eval.checks import CheckResult

        def on_loop(run, spec, ctx):
            asyncio.get_running_loop()  # registered with blocking=False: \
"safe to run on the event loop"
            return CheckResult.of("on_loop", True)

        def pytest_agent_eval_register_checks(registry):
            registry.register("on_loop", on_loop, {"const": True}, blocking=False)
        """
    )
    evals.makefile(
        ".yaml",
        eval_loop="agent: scripted:run\ncases:\n  - {id: c, input: hi, expect: {on_loop: true}}\n",
    )
    for concurrency in ("1", "2"):
        evals.runpytest(
            "-p", "no:cacheprovider", "--agent-eval-concurrency", concurrency
        ).assert_outcomes(passed=1)


def test_an_async_agent_sees_its_task_and_loop(inline: InlineLoop) -> None:
    async def agent(query: str, context: dict[str, Any]) -> str:
        return _in_task()

    assert _verdict(_run(inline, agent)) == (True, ["yes"], [])


def test_what_a_run_sets_in_its_context_stays_in_it(inline: InlineLoop) -> None:
    def sync_agent(query: str, context: dict[str, Any]) -> str:
        VAR.set("agent")
        return "yes"

    async def async_agent(query: str, context: dict[str, Any]) -> str:
        VAR.set("agent")
        return "yes"

    for agent in (sync_agent, async_agent):
        assert _run(inline, agent).passed
        assert (VAR.get(), CALL.get(None)) == ("unset", None)


async def _steps(log: list[str]) -> str:
    VAR.set("before")
    log.append("outside the loop")
    await eager.needs_loop()
    log.append(f"on the loop, {VAR.get()}, task: {asyncio.current_task() is not None}")
    await asyncio.sleep(0)
    return "done"


def test_start_hands_the_rest_to_a_task_in_the_same_context() -> None:
    log: list[str] = []
    started = eager.start(_steps(log))
    assert isinstance(started, eager.Suspended)
    assert log == ["outside the loop"]
    assert VAR.get() == "unset"
    loop = asyncio.new_event_loop()
    try:
        assert (
            loop.run_until_complete(started.context.run(loop.create_task, started.rest())) == "done"
        )
    finally:
        loop.close()
    assert log == ["outside the loop", "on the loop, before, task: True"]


def test_a_context_variable_set_before_the_hand_over_is_reset_after_it() -> None:
    async def scoped() -> str:
        token = VAR.set("scoped")
        await eager.needs_loop()
        await asyncio.sleep(0)
        seen = VAR.get()
        VAR.reset(token)  # a token of another context would raise ValueError
        return f"{seen}, then {VAR.get()}"

    started = eager.start(scoped())
    assert isinstance(started, eager.Suspended)
    assert asyncio.run(started.rest()) == "scoped, then unset"


def test_needs_loop_does_nothing_on_a_running_loop() -> None:
    log: list[str] = []
    assert asyncio.run(_steps(log)) == "done"
    assert log == ["outside the loop", "on the loop, before, task: True"]


def test_start_raises_what_the_run_raises() -> None:
    async def fails() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        eager.start(fails())


def test_a_run_stopped_before_its_hand_over_took_a_step_ends_its_trial(inline: InlineLoop) -> None:
    """Ctrl-C or pytest-timeout's signal between the hand-over and the task's first step.

    The trial's tool-mock recording ends, so a tool called later from a thread without the context
    is not served from it.
    """
    real = inline.loop.run_until_complete
    landed: list[int] = []

    def signal_lands_here(future: Any) -> Any:
        landed.append(1)
        if len(landed) == 1:
            raise KeyboardInterrupt
        return real(future)

    inline.loop.run_until_complete = signal_lands_here  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        _run(inline, lambda query, context: _Pause())  # its awaitable hands the run over
    assert contextvars.Context().run(current_recording) is None


class _Pause:
    def __await__(self) -> Generator[None, None, None]:
        yield None  # a bare yield: a task steps it again at once


def test_closing_a_handed_over_run_ends_it_in_its_own_context() -> None:
    log: list[str] = []

    async def scoped() -> None:
        token = VAR.set("scoped")
        await eager.needs_loop()
        try:
            await _Pause()
        finally:
            VAR.reset(token)  # a token of another context would raise ValueError
            log.append("cleaned up")

    started = eager.start(scoped())
    assert isinstance(started, eager.Suspended)
    rest = started.rest()
    rest.send(None)  # the task's first step: the hand-over's bare yield
    rest.send(None)  # the run goes on to its pause
    rest.close()
    assert log == ["cleaned up"]


def test_cancelling_the_rest_reaches_the_run(inline: InlineLoop) -> None:
    log: list[str] = []

    async def waits() -> None:
        await eager.needs_loop()
        try:
            await asyncio.sleep(30)
        finally:
            log.append("cleaned up")

    started = eager.start(waits())
    assert isinstance(started, eager.Suspended)
    task = inline.loop.create_task(started.rest())
    inline.loop.call_later(0.01, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        inline.loop.run_until_complete(task)
    assert log == ["cleaned up"]
