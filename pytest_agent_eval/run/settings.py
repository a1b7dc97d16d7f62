"""What every case run needs besides the case and agent, and what tool mocks hand back per trial."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.model import model

if TYPE_CHECKING:
    import asyncio

    from pytest_agent_eval.checks import CheckRegistry
    from pytest_agent_eval.core.results import ToolCall
    from pytest_agent_eval.run.slots import Slots
    from pytest_agent_eval.traces.engine import Tracing
    from pytest_agent_eval.traffic.hook import Traffic


class TrialRecording(Protocol):
    """What tool mocks recorded during one trial."""

    calls: list[ToolCall]
    violations: list[str]
    """Problems that fail the trial whatever the agent did with them (e.g.

    an unmocked tool in strict mode).
    """
    unused: list[str]
    """Declared mocks that no call used: a problem only when the agent answered."""


RecorderFactory = Callable[[Case], AbstractContextManager[TrialRecording]]


@model
class RunSettings:
    """What every case run needs besides the case and the agent."""

    checks: CheckRegistry
    default_timeout: float | None = None
    llm: Callable[..., str] | None = None
    recorder: RecorderFactory | None = None
    limit: asyncio.Semaphore | Slots | None = None
    """Bounds agent calls in flight across cases and trials.

    ``Slots`` on the background loop, shared with the cases run in worker threads.
    """
    repeat: int | None = None
    """Trials per case for every case (``--agent-eval-repeat``), instead of each case's ``repeat``.
    """
    require_llm: bool = False
    """Whether a check that needs an LLM fails when there is none, instead of 'not scored'.

    Set by ``--agent-eval-require-llm``.
    """
    inline: bool = False
    """Whether blocking calls without a timeout run in the loop's own thread.

    Set when the loop runs one case at a time.
    """
    tracing: Tracing | None = None
    """The run's tracing (SPEC §23): a trace per trial.

    Turned on by ``--agent-eval-traces``/``--agent-eval-otlp``.
    """
    traffic: Traffic | None = None
    """The HTTP traffic hook's session, when an option turned it on.

    It handles usage, cassettes, rate limits and retries.
    """
    assertion_hook: Callable[..., Any] | None = None
    """Conversations: the hook that evaluates ``expression`` assertions.

    ``pytest_agent_eval_evaluate_assertion(assertion, run, case)``.
    """
    neo4j: Any = None
    """Conversations: the ``agent_eval_neo4j`` fixture's driver for Cypher.

    ``None``: from the environment.
    """
