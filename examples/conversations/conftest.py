"""The LLM for the simulated user and the task scorer, and the conversation job's glue.

The LLM is the default OpenAI-compatible client when ``AGENT_EVAL_LLM_MODEL`` is set (live), else a
scripted stand-in so the examples run offline. Also: the agent for the conversation job (the home
format names none), a driver-shaped ``agent_eval_neo4j`` over the agent's tickets, and the hook
that evaluates the job's ``expression`` assertions.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

import pytest

from examples.conversations import agent as support
from pytest_agent_eval.llm import default_llm


def scripted_llm(messages: list[dict[str, str]], **options: Any) -> str:
    """Plays the user (tasks in order, a fact only when asked, then the signoff) or the scorer."""
    if (
        len(messages) == 1
    ):  # the scorer: a task scores the share of its acceptance criteria's words the agent said
        head, transcript = messages[0]["content"].split("Conversation:", 1)
        said = " ".join(
            line for line in transcript.lower().splitlines() if line.startswith("assistant")
        )
        scores = []
        for task, criteria in re.findall(
            r"^\d+\. \[\w+\] (.*?) \(acceptance criteria: (.*)\)$", head, re.M
        ):
            words = [w for w in re.findall(r"[a-z0-9-]{5,}", criteria.lower())]
            found = sum(w in said for w in words)
            scores.append({"scored": task, "score": round(found / len(words), 2) if words else 0.0})
        return json.dumps({"tone": 0.8, "tasks": scores})
    system = messages[0]["content"]
    tasks = re.findall(r"^\d+\. \[\w+\] (.*)$", system, re.M)
    facts = re.findall(r"^- (.*)$", system, re.M)
    signoff = re.search(r'contains exactly: "(.*)"', system)
    mine = [m["content"] for m in messages[1:] if m["role"] == "assistant"]
    agent_said = messages[-1]["content"].lower()
    for fact in facts:
        if "?" in agent_said and fact.split(":")[0].lower() in agent_said and fact not in mine:
            return fact
    pending = [t for t in tasks if t not in mine]
    return (
        pending[0] if pending else f"That's all, thanks. {signoff.group(1) if signoff else 'Bye'}"
    )


@pytest.fixture(scope="session")
def agent_eval_llm() -> Callable[..., str]:
    return default_llm() or scripted_llm


@pytest.fixture(scope="session")
def agent() -> Callable[..., Any]:
    return support.run


class Tickets:
    """A stand-in Neo4j driver over the agent's tickets: ``session().run(cypher)``, two queries."""

    def session(self) -> Tickets:
        return self

    def __enter__(self) -> Tickets:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, query: str) -> list[list[Any]]:
        if query == "MATCH (t:Ticket) DETACH DELETE t":
            support.TICKETS.clear()
            return []
        if query == "MATCH (t:Ticket) RETURN count(t)":
            return [[len(support.TICKETS)]]
        raise ValueError(f"this example graph does not understand {query!r}")


@pytest.fixture(scope="session")
def agent_eval_neo4j() -> Tickets | None:
    """The example's graph (a real Neo4j when NEO4J_URI is set: ``None``, the plugin connects)."""
    return None if os.environ.get("NEO4J_URI") else Tickets()


def pytest_agent_eval_evaluate_assertion(
    assertion: dict[str, Any], run: Any, case: Any
) -> bool | None:
    """The job's expressions (Kotlin in the home project) that this example can evaluate."""
    if assertion["expression"] == "tickets.size == 1":
        return len(support.TICKETS) == 1
    return None
