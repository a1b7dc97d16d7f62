"""The conversation loop (SPEC §9): a greeting, then simulated user and agent messages in turn.

It ends when the user says its signoff, or when the transcript reaches ``max_turns`` messages (every
message counts, the greeting included: the conversation-job home project's rule). Each agent call
may be retried; each failed attempt counts as a failure for the penalty.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.core.conversation import SimulatedUser
from pytest_agent_eval.core.results import RunRecord
from pytest_agent_eval.llm import LLM, ask
from pytest_agent_eval.traffic.clients import infrastructure_error

AgentCall = Callable[[str, dict[str, Any], Any], Awaitable[RunRecord]]
"""One agent call: ``(message, context, conversation) -> run record``.

Timed, bounded by the timeout and the concurrency; ``conversation``: the previous call's
``RunRecord.conversation``, for the adapter to continue.
"""
OffLoop = Callable[..., Awaitable[Any]]
"""Runs a blocking call (the LLM) off the event loop: ``await off_loop(func, *args)``."""

SIMULATOR_PROMPT = """You are role-playing a human user who talks to an AI assistant, to test it. \
Stay in character.
Your name: {name}.{voice}
Pursue these tasks in order, one at a time; \
go on to the next when the assistant has dealt with the current one:
{tasks}
{facts}
When every task is done, end the conversation with a message that contains exactly: "{signoff}".
Reply with your next message to the assistant only, as plain text."""
FACTS_HEADER = (
    "Facts you know (tell one only when the assistant asks for it; never volunteer them):"
)
NO_FACTS = (
    "You know no further facts: if the assistant asks you for information, say you do not know."
)


class SimulatorError(Exception):
    """The simulated user could not give a next message.

    Its LLM failed, or replied nothing usable.
    """


@dataclass
class Conversation:
    """What happened in a conversation: the run and how it ended.

    The run holds the output, the tool calls and the transcript with per-message latency.
    """

    run: RunRecord
    ended: str = "signoff"
    """``signoff``, ``max_turns`` (aborted, still scored) or ``error``."""
    failures: int = 0
    """Failed agent calls (each failed attempt of a retried call counts)."""
    notes: list[str] = field(default_factory=list)

    @property
    def agent_latencies(self) -> list[float]:
        return [m["latency_s"] for m in self.run.history if m["role"] == "assistant"]


def simulator_messages(user: SimulatedUser, history: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The prompt of the simulated user: who it is, its tasks and facts.

    Then the conversation from its side.
    """
    tasks = "\n".join(f"{n}. [{t.type}] {t.task}" for n, t in enumerate(user.tasks, 1))
    facts = FACTS_HEADER + "".join(f"\n- {f}" for f in user.facts) if user.facts else NO_FACTS
    voice = f" {user.voice}" if user.voice else ""
    system = SIMULATOR_PROMPT.format(
        name=user.name, voice=voice, tasks=tasks, facts=facts, signoff=user.signoff
    )
    flipped = {
        "user": "assistant",
        "assistant": "user",
    }  # the simulator speaks as the user: its words are its replies
    return [{"role": "system", "content": system}] + [
        {"role": flipped[m["role"]], "content": m["content"]} for m in history
    ]


def _next_message(llm: LLM, user: SimulatedUser, history: list[dict[str, Any]]) -> str:
    try:
        reply = ask(llm, simulator_messages(user, history), temperature=user.temperature)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise SimulatorError(f"simulated user LLM call failed: {text}") from exc
    message = reply.strip()
    if not message:
        raise SimulatorError(
            f"simulated user reply unusable: {reply!r} (expected the next user message as text)"
        )
    return message


async def converse(
    case_id: str,
    context: dict[str, Any],
    user: SimulatedUser,
    llm: LLM,
    call: AgentCall,
    off_loop: OffLoop,
    trial: int,
) -> Conversation:
    """Run the conversation to its signoff, ``max_turns``, or an error."""
    whole = RunRecord()
    talk = Conversation(whole)
    history: list[dict[str, Any]] = []

    async def agent_turn(message: str) -> bool:
        seen = [{"role": m["role"], "content": m["content"]} for m in history[:-1]]
        attempts = 1 + user.retries
        for attempt in range(1, attempts + 1):
            run = await call(message, {**context, "history": seen}, whole.conversation)
            if not run.error:
                break
            talk.failures += 1
            if attempt < attempts:
                talk.notes.append(
                    f"agent call failed, retried ({attempt}/{user.retries}): {run.error}"
                )
        whole.add_turn(run)
        history.append({"role": "assistant", "content": run.output, "latency_s": run.latency_s})
        if run.error:
            tries = f" (after {attempts} attempts)" if attempts > 1 else ""
            whole.error = f"message {len(history)}: {run.error}{tries}"
            whole.traceback = run.traceback
            whole.infra_error = run.infra_error
            talk.ended = "error"
            return False
        return True

    greeting = user.greeting(case_id, trial)
    history.append({"role": "user", "content": greeting, "latency_s": 0.0})
    whole.history = history
    if not await agent_turn(greeting):
        return talk
    while len(history) < user.max_turns:
        start = time.perf_counter()
        try:
            message = await off_loop(_next_message, llm, user, history)
        except SimulatorError as exc:
            whole.error = f"message {len(history) + 1}: {exc}"
            whole.infra_error = infrastructure_error(
                exc
            )  # its LLM's client failed on the network: not the agent
            talk.ended = "error"
            return talk
        history.append(
            {"role": "user", "content": message, "latency_s": time.perf_counter() - start}
        )
        if user.signoff.lower() in message.lower():
            return talk
        if not await agent_turn(message):
            return talk
    talk.ended = "max_turns"
    return talk
