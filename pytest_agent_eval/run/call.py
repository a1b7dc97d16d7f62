"""One agent call: bounded, timed, normalised, its failure told apart; its checks; its recording.

The call is bounded by the concurrency limit and the timeout, and its failure told apart (the
agent's, infrastructure's); its checks run off the loop when one may block; what tool mocks recorded
during a trial is merged into its run. Pure asyncio, no pytest.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import traceback
from collections.abc import Iterator
from typing import Any

from pytest_agent_eval.adapters import Agent, UnreadableResult
from pytest_agent_eval.checks import CheckContext, evaluate
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import CheckResult, RunRecord, merged_calls
from pytest_agent_eval.core.tool_errors import unmocked_stop
from pytest_agent_eval.core.trial import CONVERSATION
from pytest_agent_eval.faults import describe, original
from pytest_agent_eval.run.agents import invoke
from pytest_agent_eval.run.blocking import in_thread, outside_loop
from pytest_agent_eval.run.settings import RunSettings, TrialRecording
from pytest_agent_eval.run.stalls import LoopBlocked

_PACKAGE_DIR = os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))
)  # the package, above run/

INFRA = "infrastructure error (not the agent's): "
"""How a run's error reads when infrastructure failed.

Such as a refused connection, a 429/5xx after retries, ...
"""


def agent_traceback(exc: BaseException) -> str | None:
    """The exception with the agent's own frames, the packages' frames between them folded.

    Each run of an installed package's frames between them is folded into one line that names the
    packages (the plugin's and the standard library's are left out). ``None`` when no frame is the
    agent's own (an error inside a framework): the error's line says what there is to say.
    """
    exc = original(exc)
    lines = ["Traceback (most recent call last):\n"]
    folded: list[str] = []  # the packages of the frames since the last own one ("" for hidden ones)

    def fold() -> None:
        named = list(dict.fromkeys(p for p in folded if p))
        if named:
            lines.append(f"  … {len(folded)} frames in {', '.join(named)}\n")
        folded.clear()

    own = 0
    for frame in traceback.extract_tb(exc.__traceback__):
        package = _library(frame.filename)
        if package is not None:
            folded.append(package)
            continue
        fold()
        lines += traceback.format_list([frame])
        own += 1
    if not own:
        return None
    fold()
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


_SITE_DIRS = ("site-packages", "dist-packages")


@functools.cache
def _stdlib() -> tuple[str, ...]:
    """The standard library's folders (``sysconfig`` loads with an agent's first traceback)."""
    import sysconfig

    return tuple({os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib")})


def _library(filename: str) -> str | None:
    """The installed package a frame's file is in.

    ``""`` for the plugin's, the standard library's and frozen modules' (left out without a word);
    ``None`` for the agent's own code.
    """
    if filename.startswith((_PACKAGE_DIR, "<")):
        return ""
    parts = filename.split(os.sep)
    site = next((n for n, part in enumerate(parts) if part in _SITE_DIRS), None)
    if site is not None:
        return parts[site + 1].partition(".")[0] if site + 1 < len(parts) else ""
    return "" if filename.startswith(_stdlib()) else None


def agent_error(exc: BaseException) -> str:
    """What the agent did, as a failure's line.

    ``agent raised Type: message``, or ``agent called sys.exit(3)``; for a call of a tool without a
    mock that stopped it, that call's line (the call, its arguments, the case's ``path:line``).
    """
    if isinstance(exc, LoopBlocked):
        return str(exc)
    stop = unmocked_stop(exc)
    if stop is not None:
        return stop.violation
    verb = "called" if isinstance(original(exc), SystemExit) else "raised"
    return f"agent {verb} {describe(exc)}"


async def _guarded(
    agent: Agent, query: str, context: dict[str, Any], inline: bool, conversation: Any
) -> tuple[Any, Exception | None]:
    """The agent's result, or the exception it raised.

    An agent's own ``TimeoutError`` is not the timeout's. ``conversation``: the previous call's
    ``RunRecord.conversation``, as ``CONVERSATION`` during the call.

    The call's coroutine is made here, once this one runs: a case cancelled before its timeout's
    task started (its loop abandoned) leaves no coroutine that was never awaited.
    """
    token = CONVERSATION.set(conversation)
    try:
        return await invoke(agent, query, context, inline=inline), None
    except Exception as exc:
        return None, exc
    finally:
        CONVERSATION.reset(token)


async def call_agent(
    case: Case,
    agent: Agent,
    query: str,
    context: dict[str, Any],
    settings: RunSettings,
    conversation: Any = None,
) -> RunRecord:
    """One agent call, bounded by the concurrency limit and the timeout, timed, normalised.

    ``conversation``: what the previous call of a conversation left in ``RunRecord.conversation``,
    for the adapter to continue.
    """
    timeout = case.timeout if case.timeout is not None else settings.default_timeout
    async with settings.limit if settings.limit is not None else contextlib.nullcontext():
        start = time.perf_counter()
        call = _guarded(agent, query, context, settings.inline and timeout is None, conversation)
        if timeout is None:
            raw, exc = await call
        else:
            import asyncio  # a timeout runs on the loop (``needs_loop``): loaded by then

            try:
                raw, exc = await asyncio.wait_for(call, timeout)
            except (
                asyncio.TimeoutError,
                TimeoutError,
            ):  # only the deadline: the agent's own errors are in `exc`
                return RunRecord(
                    latency_s=time.perf_counter() - start,
                    error=f"agent did not answer within {timeout:g} s (timeout of case {case.id})",
                    timed_out=True,
                )
        latency = time.perf_counter() - start
    if exc is not None:
        return _failed(exc, latency)
    try:
        record = agent.adapter.normalise(raw)
    except UnreadableResult as exc:
        return RunRecord(latency_s=latency, error=str(exc))
    except Exception as exc:
        return RunRecord(
            latency_s=latency, error=f"cannot read the agent's result: {describe(exc)}"
        )
    record.latency_s = latency
    return record


def _failed(exc: Exception, latency: float) -> RunRecord:
    """The record of a call that raised: the agent's error, or infrastructure's.

    Infrastructure's is a known LLM client's exception.
    """
    from pytest_agent_eval.traffic.clients import infrastructure_error  # on an error only

    infra = infrastructure_error(exc)
    error = agent_error(exc) if infra is None else f"{INFRA}{infra}"
    return RunRecord(
        latency_s=latency, error=error, traceback=agent_traceback(exc), infra_error=infra
    )


async def checked(
    run: RunRecord, expect: dict[str, Any], ctx: CheckContext, settings: RunSettings
) -> list[CheckResult]:
    """``evaluate``, off the loop when a check declares it may block (user code, the LLM, I/O)."""
    args = (run, expect, ctx, settings.checks)
    if not settings.checks.blocking(expect):
        return evaluate(*args)
    results: list[CheckResult] = (
        outside_loop(evaluate, *args) if settings.inline else await in_thread(evaluate, *args)
    )
    return results


@contextlib.contextmanager
def no_recording(case: Case) -> Iterator[None]:
    """The recorder of a case without tool mocks: nothing recorded."""
    yield None


def recorded(run: RunRecord, recording: TrialRecording | None, unused: bool = True) -> list[str]:
    """Merge what the tool mocks recorded into ``run``'s tool calls; return the trial's violations.

    The violations are the recording's (not the run's error again) and, with ``unused`` and an agent
    that did not fail early, its unused mocks.
    """
    if recording is None:
        return []
    run.tool_calls = merged_calls(run.tool_calls, recording.calls)
    violations = [
        v for v in recording.violations if v not in (run.error or "")
    ]  # not the error again
    if unused and not run.error:  # an agent that failed early had no chance to call them
        violations.extend(recording.unused)
    return violations
