"""What an agent run produced: the output, the tool calls, timing and usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.report.render import bounded_repr


@dataclass
class ToolCall:
    """One tool call: its name, arguments, and the result or error it gave."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None

    def describe(self) -> str:
        """``name(a=1, b='x')`` for failure output."""
        args = ", ".join(f"{k}={bounded_repr(v)}" for k, v in self.args.items())
        return f"{self.name}({args})"


@dataclass
class AgentResult:
    """What an agent may return to report its output, tool calls and more."""

    output: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunRecord:
    """One run of the agent on one case (one trial), normalised from whatever the agent returned."""

    output: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    error: str | None = None
    """Set when the agent raised or timed out: a one-line description."""
    traceback: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    """Multi-turn cases: the conversation, ``{"role", "content"}`` per message."""
    infra_error: str | None = None
    """An LLM request that failed on infrastructure (refused, 429/5xx after retries, replay miss): the case errors."""

    @property
    def tool_names(self) -> list[str]:
        return [c.name for c in self.tool_calls]
