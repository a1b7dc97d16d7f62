"""What running produces: an agent run's record, and a check's, a trial's and a case's result.

A run's record holds its output, tool calls, timing and usage.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeGuard

from pytest_agent_eval.core.model import model
from pytest_agent_eval.text import bounded_repr

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case


@model
class ToolCall:
    """One tool call: its name, arguments, and the result or error it gave."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    server: str | None = None
    """The MCP server that serves the tool (its ``serverInfo.name``); ``None`` for a function tool.
    """
    mocked: bool | None = field(default=None, compare=False)
    """Answered by a tool mock (``True``) or the real tool (``False``).

    ``None``: not known (the agent reported it).
    """
    start_ns: int | None = field(default=None, compare=False)
    end_ns: int | None = field(default=None, compare=False)
    """When the call began and ended (``time.time_ns``), where tool mocks saw it.

    These are its span's times (SPEC §23).
    """

    def describe(self) -> str:
        """``name(a=1, b='x')`` (``server.name(...)`` for an MCP tool) for failure output."""
        args = ", ".join(f"{k}={bounded_repr(v)}" for k, v in self.args.items())
        return f"{self.server + '.' if self.server else ''}{self.name}({args})"


@model
class AgentResult:
    """What an agent may return to report its output, tool calls and more."""

    output: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)


@model
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
    timed_out: bool = False
    """Whether the case's timeout ended the call (``error`` says so).

    While a request waited on traffic, the timeout is infrastructure's.
    """
    traceback: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    """Multi-turn cases: the conversation, ``{"role", "content"}`` per message."""
    infra_error: str | None = None
    """An LLM request that failed on infrastructure: the case errors.

    Such as a refused one, a 429/5xx after retries, a replay miss.
    """
    turns: int = 0
    """The agent calls added to this record with :meth:`add_turn` (a conversation's)."""
    trace_id: str | None = None
    """The trial's trace (32 hex digits) when the run traces (SPEC §23)."""
    spans: list[dict[str, Any]] | None = None
    """The trial's span tree when the run traces or its case checks spans.

    Each span is ``{name, kind, attributes, status, start, duration_ms, parent}``, ``parent`` an
    index in this list.
    """
    conversation: Any = field(default=None, repr=False, compare=False)
    """The conversation after this call, in the agent's own form; never reported.

    It is a framework's message list, which the next message of a ``turns:`` or simulated-user case
    continues (``core.trial.CONVERSATION``).
    """

    @property
    def tool_names(self) -> list[str]:
        return [c.name for c in self.tool_calls]

    def add_turn(self, turn: RunRecord) -> None:
        """Add one agent call of a conversation to this, the conversation's record.

        Latency and usage are summed, tool calls and metadata lists joined; the answer, reasoning,
        other metadata and conversation are the turn's. A usage figure that some call did not report
        is ``None`` (unknown), never the sum of the others.
        """
        self.latency_s += turn.latency_s
        self.tool_calls.extend(turn.tool_calls)
        self.output, self.reasoning, self.conversation = (
            turn.output,
            turn.reasoning,
            turn.conversation,
        )
        if self.turns == 0:
            self.usage = dict(turn.usage)
        else:
            for key in {*self.usage, *turn.usage}:
                mine, theirs = self.usage.get(key), turn.usage.get(key)
                if _number(mine) and _number(theirs):
                    self.usage[key] = mine + theirs
                # a figure one call did not report (or a text that differs) is not known for the
                # whole
                else:
                    self.usage[key] = theirs if mine == theirs else None
        self.turns += 1
        for key, value in turn.metadata.items():
            mine = self.metadata.get(key)
            self.metadata[key] = (
                [*mine, *value] if isinstance(mine, list) and isinstance(value, list) else value
            )


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def merged_calls(reported: list[ToolCall], recorded: list[ToolCall]) -> list[ToolCall]:
    """Merge the tool calls the agent reported with those the tool mocks recorded.

    A call both saw is listed once (the mocks' record of it: the arguments the tool got, the answer
    it gave), in the agent's order; a recorded call the agent did not report (a plain agent reports
    none) before the next recorded one it did. Matched by name, and by arguments first: parallel
    calls may reach the mocks in another order than the agent lists them.
    """
    matched: dict[int, int] = {}  # reported index -> recorded index
    for i, call in enumerate(reported):
        free = [
            j for j, r in enumerate(recorded) if j not in matched.values() and r.name == call.name
        ]
        same = [j for j in free if recorded[j].args == call.args]
        if same or free:
            matched[i] = (same or free)[0]
    taken = set(matched.values())
    out: list[ToolCall] = []
    placed = 0  # recorded calls before this index are out (or matched)
    for i, call in enumerate(reported):
        j = matched.get(i)
        if j is None:
            out.append(call)
            continue
        out.extend(recorded[k] for k in range(placed, j) if k not in taken)
        placed = max(placed, j + 1)
        out.append(recorded[j])
    out.extend(recorded[k] for k in range(placed, len(recorded)) if k not in taken)
    return out


@model
class CheckResult:
    """The verdict of one check on one run."""

    name: str
    passed: bool
    score: float = 1.0
    expected: Any = None
    actual: Any = None
    message: str = ""
    detail: list[str] = field(default_factory=list)
    """Extra lines for the failure output (an aligned trajectory, an excerpt, ...)."""
    scored: bool = True
    """False for a check that could not be scored (e.g. no LLM): left out of the mean."""
    error: bool = False
    """Whether the check could not reach a verdict; never a pass, whatever the score says.

    Such as an unreadable judge reply, an LLM call that failed, a check that raised; ``message``
    says why.
    """
    infra_error: str | None = None
    """Set when the check's own LLM request failed on infrastructure: the case errors (SPEC §14).

    A known client's exception, naming the request; not the agent's failure.
    """

    @classmethod
    def of(cls, name: str, passed: bool, **kw: Any) -> CheckResult:
        kw.setdefault("score", 1.0 if passed else 0.0)
        return cls(name=name, passed=passed, **kw)


@model
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
    """The failure's one-line summary when the trial's own verdict says it best.

    Such as a conversation's composite.
    """
    parts: dict[str, str] = field(default_factory=dict)
    """A conversation's score parts for reports.

    ``timing``, ``tasks``, ``assertions``, ``penalty``, ``ended``.
    """

    @property
    def scored(self) -> bool:
        """Whether ``score`` is a real score: no check lacks a verdict, and something was scored."""
        if any(c.error for c in self.checks):
            return False
        return bool(self.run.error or self.violations or any(c.scored for c in self.checks))


@model
class CaseResult:
    """A case's verdict over all its trials."""

    case: Case
    trials: list[TrialResult]
    passed: bool
    score: float
    cassette: tuple[str, str] | None = None
    """The cassette recorded on an xdist worker, for its controller to write.

    As (its path in its folder, its text).
    """
    trials_max: int | None = None
    """Of an adaptive case (``repeat: {max, stop: decided}``): its ``max``; ``None`` for the others.
    """

    @property
    def shown_trial(self) -> TrialResult:
        """The trial to show: the first failing one, else the first."""
        return next((t for t in self.trials if not t.passed), self.trials[0])

    @property
    def passes(self) -> int:
        return sum(t.passed for t in self.trials)

    @property
    def unscored(self) -> list[CheckResult]:
        """The checks, when there are some and none of them could be scored (e.g.

        LLM checks without an LLM).
        """
        checks = [c for t in self.trials for c in t.checks]
        return [] if any(c.scored for c in checks) else checks
