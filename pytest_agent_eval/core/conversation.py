"""The parts of a simulated-user conversation: the user, its tasks, the assertions, the scoring."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_WEIGHTS = {"timing": 1.0, "tasks": 2.0, "assertions": 4.0}
"""The composite's default weights.

As the conversation-job home project weighs them: ``(timing + 2·task + 4·assertion) / 7``.
"""
DEFAULT_MIN_SCORE = 0.7
DEFAULT_SIGNOFF = "Thanks, goodbye"


@dataclass(frozen=True)
class Task:
    """One thing the simulated user pursues.

    It is scored after the conversation against its acceptance criteria.
    """

    task: str
    acceptance_criteria: str
    type: str = "task"
    """``task`` (ask the agent to do something) or ``question`` (ask it something)."""


@dataclass(frozen=True)
class Assertion:
    """A post-conversation check of what the agent did.

    It is a native check, a Cypher query or an expression.
    """

    kind: str
    """``check`` (``spec`` is ``{check: value}``), ``cypher`` or ``expression``."""
    spec: dict[str, Any]
    """The assertion as written, without ``weight``."""
    weight: float = 1.0
    line: int = 0

    @property
    def name(self) -> str:
        """How the assertion is shown: the check's name, or its query / expression."""
        if self.kind == "check":
            return next(iter(self.spec))
        return f"{self.kind} {self.spec[self.kind]}"


@dataclass(frozen=True)
class SimulatedUser:
    """An LLM playing the user (SPEC §9): who it is, what it wants and knows, when it stops."""

    tasks: tuple[Task, ...]
    name: str = "User"
    voice: str = ""
    greetings: tuple[str, ...] = ("Hello",)
    facts: tuple[str, ...] = ()
    """Told to the agent only when it asks for them."""
    signoff: str = DEFAULT_SIGNOFF
    max_turns: int = 20
    """Messages in the conversation, the user's and the agent's (the greeting included)."""
    temperature: float = 0.5
    retries: int = 0
    """Retries of a failed agent call; each failed attempt counts in the failure penalty."""
    aspirational_latency_s: float | None = None
    """The timing score's target mean response time; none: no timing part."""
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    assertions: tuple[Assertion, ...] = ()
    setups: tuple[str, ...] = ()
    """Cypher run through the Neo4j connection before the conversation."""
    scorer_temperature: float = 0.0
    variant: str | None = None
    """The conversation job's ``without_facts`` / ``with_facts``."""

    @property
    def uses_neo4j(self) -> bool:
        """Whether the conversation needs the Neo4j connection (setups, Cypher assertions)."""
        return bool(self.setups) or any(a.kind == "cypher" for a in self.assertions)

    def greeting(self, case_id: str, trial: int) -> str:
        """The first message: picked deterministically per case and trial."""
        import zlib

        return self.greetings[zlib.crc32(f"{case_id}#{trial}".encode()) % len(self.greetings)]


ASSERTION_KEYS = ("cypher", "expression")


def assertion(raw: dict[str, Any], line: int = 0) -> Assertion:
    """Build an assertion from its (validated) mapping.

    The mapping is ``{cypher, expected, weight}``, ``{expression, weight}`` or
    ``{<check>: value, weight}``.
    """
    spec = {k: v for k, v in raw.items() if k != "weight"}
    kind = next((k for k in ASSERTION_KEYS if k in spec), "check")
    return Assertion(kind, spec, float(raw.get("weight", 1.0)), line)


def from_native(
    raw: dict[str, Any],
    assertions: list[Any],
    score: dict[str, Any],
    lines: list[int] | None = None,
) -> SimulatedUser:
    """Build the simulated user of a native case.

    From its ``simulated_user:``, ``assertions:`` and ``score:`` (schema-valid).
    """
    persona = raw.get("persona") or {}
    if isinstance(persona, str):
        persona = {"name": persona}
    greetings = raw.get("greetings") or ["Hello"]
    tasks = tuple(
        Task(t, "")
        if isinstance(t, str)
        else Task(t["task"], t.get("acceptance_criteria", ""), t.get("type", "task"))
        for t in raw["tasks"]
    )
    lines = lines or [0] * len(assertions)
    return SimulatedUser(
        tasks=tasks,
        name=persona.get("name", "User"),
        voice=persona.get("voice", ""),
        greetings=tuple([greetings] if isinstance(greetings, str) else greetings),
        facts=tuple(raw.get("facts") or ()),
        signoff=raw.get("signoff", DEFAULT_SIGNOFF),
        max_turns=raw.get("max_turns", 20),
        temperature=raw.get("temperature", 0.5),
        retries=raw.get("retries", 0),
        aspirational_latency_s=score.get("aspirational_latency_s"),
        weights={**DEFAULT_WEIGHTS, **(score.get("weights") or {})},
        assertions=tuple(assertion(a, line) for a, line in zip(assertions, lines, strict=True)),
    )
