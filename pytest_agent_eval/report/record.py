"""The per-case record every report is built from (SPEC §10): plain data, made once per item.

The record is made where the item ran and carried to the xdist controller on the test report, so
every report reads the same with and without ``-n``.

No pytest import at module level beyond types: the record is built from the item's ``CaseResult``
and the pytest ``TestReport``'s outcome, and read back from plain JSON data by the reports and
``agent-eval``.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.core.model import model
from pytest_agent_eval.report.case_input import case_input, content_hash
from pytest_agent_eval.report.jsonable import JSON, cut, encodable, finite, jsonable

if TYPE_CHECKING:
    import pytest

    from pytest_agent_eval.core.results import (
        CaseResult,
        CheckResult,
        RunRecord,
        ToolCall,
        TrialResult,
    )

OUTPUT_LIMIT = 20_000
"""Characters of the agent's output and of each transcript message kept in a record."""
_INPUT_TOKENS = ("input_tokens", "prompt_tokens")
_OUTPUT_TOKENS = ("output_tokens", "completion_tokens")
_CACHE_TOKENS = (("cache_read", "cache_read_tokens"), ("cache_write", "cache_write_tokens"))
"""The record's names of the cache token counts, and the run usage's."""


@model
class CheckRecord:
    """One check's verdict.

    ``scored`` is False for a check that could not be scored (left out of the score).
    """

    name: str
    passed: bool
    score: float | None
    message: str = ""
    expected: JSON = None
    actual: JSON = None
    scored: bool = True

    @classmethod
    def of(cls, check: CheckResult, detail: bool) -> CheckRecord:
        """The record of ``check``.

        With ``detail``, its expected and actual values too (bounded).
        """
        return cls(
            name=check.name,
            passed=check.passed,
            score=check.score if check.scored else None,
            message=cut(check.message),
            expected=jsonable(check.expected) if detail else None,
            actual=jsonable(check.actual) if detail else None,
            scored=check.scored,
        )


@model
class ToolCallRecord:
    """One tool call the agent made: name, arguments and the result or error it got."""

    name: str
    args: JSON = None
    result: JSON = None
    error: str | None = None
    server: str | None = None
    """An MCP tool's server (SPEC §28); left out of the report for a function tool."""

    @classmethod
    def of(cls, call: ToolCall) -> ToolCallRecord:
        server = _text(call.server) if call.server else None
        return cls(
            encodable(call.name),
            jsonable(call.args),
            jsonable(call.result),
            _text(call.error),
            server,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if out["server"] is None:
            del out["server"]
        return out


@model
class TrialRecord:
    """One trial: its verdict, score, latency and usage, and each check's verdict.

    The checks' verdicts are kept without values.
    """

    passed: bool
    score: float | None
    """``None`` when a check had no verdict or nothing was scored."""
    latency_s: float
    error: str | None = None
    tokens: dict[str, int] | None = None
    cost: float | None = None
    checks: list[CheckRecord] = field(default_factory=list)
    trace_id: str | None = None

    @classmethod
    def of(cls, trial: TrialResult) -> TrialRecord:
        tokens, cost = usage(trial.run)
        return cls(
            passed=trial.passed,
            score=trial.score if trial.scored else None,
            latency_s=trial.run.latency_s,
            error=None if trial.run.error is None else encodable(trial.run.error),
            tokens=tokens,
            cost=cost,
            checks=[CheckRecord.of(c, detail=False) for c in trial.checks],
            trace_id=trial.run.trace_id,
        )


@model
class CaseRecord:
    """Everything the reports say about one eval item.

    ``checks``, ``tool_calls``, ``output``, ``transcript``, ``latency_s`` are those of the trial the
    failure output shows (the first failing one, else the first); ``trials`` has every trial's
    verdict. ``score`` is the mean over trials, ``None`` when the case did not run, a check had no
    verdict or nothing could be scored.
    """

    nodeid: str
    case_id: str
    file: str
    line: int
    outcome: str
    tags: list[str] = field(default_factory=list)
    description: str | None = None
    metadata: JSON = field(default_factory=dict)
    """The case's ``metadata``, and beside it what the run reported.

    What the run reported: an adapter's ``handoffs``, ``last_agent``; a conversation's joined over
    its messages. The run's value wins a key both have.
    """
    score: float | None = None
    min_score: float | None = None
    min_pass_rate: float = 1.0
    passes: int = 0
    trials: list[TrialRecord] = field(default_factory=list)
    checks: list[CheckRecord] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    output: str | None = None
    transcript: list[JSON] = field(default_factory=list)
    latency_s: float | None = None
    tokens: dict[str, int] | None = None
    """Token counts summed over trials, when the agent reported usage.

    ``{"input", "output", "total"}``; with ``cache_read`` and ``cache_write`` (input tokens read
    from and written to the prompt cache, part of ``input``) when reported.
    """
    cost: float | None = None
    """The cost summed over trials, when the agent reported a cost (``usage["cost"]``).

    ``None`` when a model had no price.
    """
    unpriced_models: list[str] = field(default_factory=list)
    """The models the traffic hook found no price for (``usage["unpriced_models"]``).

    With any, the case's cost is unknown.
    """
    error: str | None = None
    """Why the case errored or failed outside its checks.

    The agent's error, a strict-mode violation, or the failure of an item whose case never ran (no
    agent, an invalid case, a fixture error).
    """
    reason: str | None = None
    """Why the case was skipped or is an expected failure."""
    duration_s: float = 0.0
    """Seconds pytest reports for the item's call (or setup, when the case never ran)."""
    agent: str | None = None
    """The matrix agent's name of a variant ``case[name]``; ``None`` outside a matrix."""
    conversation: dict[str, str] | None = None
    """A simulated-user conversation's score parts of the trial shown; ``None`` for other cases.

    The parts: ``timing``, ``tasks``, ``assertions``, ``penalty``, ``ended``.
    """
    input: JSON = None
    """What the case gives the agent: ``query`` or ``turns`` or ``simulated_user``, and ``context``.

    ``None`` for an item without a case (a file that cannot be read).
    """
    content_hash: str | None = None
    """16 hex digits of a hash of the case's content.

    The same from run to run until the case is edited.
    """
    k: int | None = None
    pass_at_k: float | None = None
    pass_hat_k: float | None = None
    """A repeated case's ``k``, pass@k and pass^k (SPEC §20).

    Of a repeated case (``repeat`` > 1): the chance that at least one (pass@k) / every one (pass^k)
    of ``k`` trials passes, unbiased from its trials and passes; ``None`` when ``k`` exceeds its
    trials.
    """
    cached: bool = False
    """Reported from the verdict cache (SPEC §25).

    The record of an earlier run, whose case was not run again.
    """
    run_id: str | None = None
    """Of a record from the verdict cache: the id of the run that made it (its trace ids are that
    run's too); ``None`` for the others.
    """
    trials_used: int | None = None
    trials_saved: int | None = None
    """Of an adaptive case (``repeat: {max, stop: decided}``, SPEC §25): the trials run and saved.

    The trials run, and those of its ``max`` not run because the verdict was decided; ``None`` for
    the others.
    """
    trace_id: str | None = None
    """The trace of the trial shown, when the run traced (SPEC §23); each trial's is in ``trials``.
    """
    trace_url: str | None = None
    """Its link (``--agent-eval-trace-url``), set where the report is written."""
    spans: list[JSON] | None = None
    """The span tree of the trial shown (``RunRecord.spans``), when traced."""

    def to_dict(self) -> dict[str, JSON]:
        """As ``dataclasses.asdict``, without its deep copy.

        The values are JSON-able already and not changed after: this runs once per item, on the
        item's report.
        """
        out: dict[str, Any] = dict(self.__dict__)
        out["checks"] = list(map(dict, map(vars, self.checks)))
        out["tool_calls"] = [c.to_dict() for c in self.tool_calls] if self.tool_calls else []
        out["trials"] = [
            {**t.__dict__, "checks": list(map(dict, map(vars, t.checks)))} for t in self.trials
        ]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseRecord:
        data = dict(data)
        data["checks"] = [CheckRecord(**c) for c in data.get("checks", [])]
        data["tool_calls"] = [ToolCallRecord(**c) for c in data.get("tool_calls", [])]
        data["trials"] = [
            TrialRecord(**{**t, "checks": [CheckRecord(**c) for c in t.get("checks", [])]})
            for t in data.get("trials", [])
        ]
        return cls(**data)

    @property
    def ran(self) -> bool:
        """Whether the case ran (its agent was called): it has trials."""
        return bool(self.trials)

    def junit_properties(self) -> list[tuple[str, str]]:
        """The ``--junitxml`` properties of the case.

        Score, tools called, latency, location, passes.
        """
        if not self.trials:
            return []
        props = [
            (
                "score",
                f"{self.score:.3f}" if self.score is not None else "not scored",
            ),  # never a made-up number
            ("tools_called", ", ".join([c.name for c in self.tool_calls])),
            ("latency_s", f"{self.latency_s or 0.0:.3f}"),
            ("location", f"{self.file}:{self.line}"),
        ]
        if len(self.trials) > 1:
            props.append(("passes", f"{self.passes}/{len(self.trials)}"))
        if self.conversation:
            props.extend(self.conversation.items())
        traces = [t.trace_id for t in self.trials if t.trace_id]
        if traces:  # SPEC §23: each trial's trace
            props.append(("trace_id", " ".join(traces)))
        return props


def usage(run: RunRecord) -> tuple[dict[str, int] | None, float | None]:
    """Tokens and cost from what the agent reported as ``usage``.

    The tokens: ``input``, ``output``, ``total``.
    """
    found = run.usage
    if not found:  # nothing reported
        return None, None
    inp = next((found[k] for k in _INPUT_TOKENS if isinstance(found.get(k), int)), None)
    out = next((found[k] for k in _OUTPUT_TOKENS if isinstance(found.get(k), int)), None)
    total = found.get("total_tokens")
    if not isinstance(total, int):
        total = (inp or 0) + (out or 0) if inp is not None or out is not None else None
    tokens = {"input": inp or 0, "output": out or 0, "total": total} if total is not None else None
    if tokens is not None:
        tokens.update(
            (name, found[key]) for name, key in _CACHE_TOKENS if isinstance(found.get(key), int)
        )
    return tokens, finite(found.get("cost"))  # NaN or inf is not a cost: unknown


def _text(text: str | None) -> str | None:
    return None if text is None else encodable(text)


def _summed(parts: list[dict[str, int]]) -> dict[str, int] | None:
    """Token counts summed over trials: each count any trial has.

    ``cache_read`` only where reported.
    """
    if not parts:
        return None
    return {
        key: sum(part.get(key, 0) for part in parts)
        for key in dict.fromkeys(k for part in parts for k in part)
    }


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def from_result(
    nodeid: str, file: str, result: CaseResult, k: int | None = None, content: bool = True
) -> CaseRecord:
    """The record of a case that ran; its outcome is set later, from the test report.

    ``k``: of pass@k and pass^k (``--agent-eval-k``; default: the case's trials). ``content``: with
    the case's input and content hash (only a written report shows them: ``attach.wants_content``).
    """
    case = result.case
    shown = result.shown_trial
    trials = [TrialRecord.of(t) for t in result.trials]
    token_parts = [t.tokens for t in trials if t.tokens is not None]
    costs = [t.cost for t in trials if t.cost is not None]
    unpriced = sorted(
        {str(m) for t in result.trials for m in _listed(t.run.usage.get("unpriced_models"))}
    )
    return CaseRecord(
        nodeid=nodeid,
        case_id=case.id,
        file=file,
        line=case.line,
        outcome="passed" if result.passed else "failed",
        tags=list(case.tags),
        description=case.description,
        metadata=jsonable({**case.metadata, **shown.run.metadata}),
        score=result.score if all(t.scored for t in result.trials) else None,
        min_score=case.min_score,
        min_pass_rate=case.min_pass_rate,
        passes=result.passes,
        trials=trials,
        checks=[CheckRecord.of(c, detail=True) for c in shown.checks],
        tool_calls=[ToolCallRecord.of(c) for c in shown.run.tool_calls]
        if shown.run.tool_calls
        else [],
        output=cut(shown.run.output, OUTPUT_LIMIT),
        transcript=[jsonable(m, OUTPUT_LIMIT) for m in shown.run.history]
        if shown.run.history
        else [],
        latency_s=shown.run.latency_s,
        tokens=_summed(token_parts),
        cost=sum(costs) if costs and not unpriced else None,
        unpriced_models=unpriced,
        error=_text(shown.run.error or (shown.violations[0] if shown.violations else None)),
        conversation=dict(shown.parts) or None,
        agent=case.agent_name,
        input=case_input(case) if content else None,
        content_hash=content_hash(case) if content else None,
        trials_used=len(trials) if result.trials_max is not None else None,
        trials_saved=result.trials_max - len(trials) if result.trials_max is not None else None,
        trace_id=shown.run.trace_id,
        spans=None
        if shown.run.spans is None
        else [jsonable(s, OUTPUT_LIMIT) for s in shown.run.spans],
        **_pass_k(len(trials), result.passes, k),
    )


def _pass_k(n: int, c: int, k: int | None) -> dict[str, Any]:
    """The record's ``k``, ``pass_at_k`` and ``pass_hat_k`` for ``n`` trials with ``c`` passes.

    None for one trial.
    """
    if n < 2:
        return {}
    from pytest_agent_eval.report.significance import pass_at_k, pass_hat_k

    k = n if k is None else k
    return {"k": k, "pass_at_k": pass_at_k(n, c, k), "pass_hat_k": pass_hat_k(n, c, k)}


def outcome(report: pytest.TestReport) -> str:
    """The report's outcome as pytest's terminal counts it.

    One of passed / failed / skipped / error / xfailed / xpassed.
    """
    xfail = hasattr(report, "wasxfail")
    if report.failed and (report.when != "call" or getattr(report, "agent_eval_infra", False)):
        # outside the test body, or the LLM's infrastructure failed (traffic layer): not the agent
        return "error"
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    if report.passed:
        return "xpassed" if xfail else "passed"
    return "failed"


def crash_message(report: pytest.TestReport) -> str | None:
    """The one-line reason of a failed or skipped report, for items whose case never ran."""
    longrepr = report.longrepr
    if longrepr is None or report.passed:
        return None
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return cut(str(longrepr[2]).removeprefix("Skipped: "))
    crash = getattr(longrepr, "reprcrash", None)
    text = getattr(crash, "message", None) or str(longrepr)
    return cut(str(text))
