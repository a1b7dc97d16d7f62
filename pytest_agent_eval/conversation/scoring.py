"""A conversation's scores (SPEC §9): timing, tasks, assertions and the composite.

The tasks' scores are read from the LLM scorer.

The task scorer asks for, and reads only, the conversation-job home project's reply shape:
``{"tone": 0..1, "tasks": [{"scored": "<task text>", "score": 0..1}]}``. A reply it cannot read
leaves the tasks part without a verdict (the reply is shown), never a made-up number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.core.conversation import SimulatedUser
from pytest_agent_eval.core.results import CheckResult
from pytest_agent_eval.llm import LLM, ask
from pytest_agent_eval.traffic.clients import infrastructure_error

REPLY_SHAPE = '{"tone": <0..1>, "tasks": [{"scored": "<the task text>", "score": <0..1>}, ...]}'
SCORER_PROMPT = """You score a conversation between a user and an AI assistant.
For each task below, score from 0 to 1 how well the assistant accomplished it, \
judged by its acceptance criteria.
Also score the assistant's tone from 0 to 1.
Tasks:
{tasks}
Conversation:
{transcript}
Reply with JSON only, in this shape (one entry per task, "scored" being the task text as given):
{shape}"""
_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


class ScorerReplyError(Exception):
    """The scorer's reply is not the expected shape; the message shows the reply."""


def _excerpt(text: str, limit: int = 300) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def transcript_text(history: list[dict[str, Any]]) -> str:
    """The transcript, one message a line.

    Nothing that differs from run to run (the response times: the timing part is the plugin's own
    sum) is in it, so that a recorded scorer's request matches on replay.
    """
    return "\n".join(f"{m['role']}: {m['content']}" for m in history)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def read_task_scores(reply: str, user: SimulatedUser) -> tuple[list[float], float | None]:
    """One score per task (matched by text, else by position when the counts agree) and the tone."""
    text = reply.strip()
    fenced = _FENCE.search(text)
    data: Any = None
    for candidate in ([fenced.group(1).strip()] if fenced else []) + [text]:
        try:
            data = json.loads(candidate)
            break
        except ValueError:
            continue
    bad = f"task scorer reply unreadable: {_excerpt(reply)!r}; expected {REPLY_SHAPE}"
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise ScorerReplyError(bad)
    entries = data["tasks"]
    if not all(isinstance(e, dict) and _number(e.get("score")) is not None for e in entries):
        raise ScorerReplyError(f"{bad} (every task needs a score from 0 to 1)")
    by_text: dict[str, float] = {}
    for entry in entries:
        key, score = str(entry.get("scored", "")).strip().lower(), float(entry["score"])
        if by_text.setdefault(key, score) != score:
            number = next(
                (n for n, t in enumerate(user.tasks, 1) if t.task.strip().lower() == key), None
            )
            named = f"task {number}" if number is not None else repr(entry.get("scored"))
            raise ScorerReplyError(f"{bad} (two different scores for {named})")
    scores: list[float] = []
    for n, task in enumerate(user.tasks):
        key = task.task.strip().lower()
        if key in by_text:
            scores.append(by_text[key])
        elif len(entries) == len(user.tasks):
            scores.append(float(entries[n]["score"]))
        else:
            raise ScorerReplyError(f"{bad} (no score for task {n + 1}: {task.task!r})")
    tone = _number(data.get("tone"))
    return scores, tone


def score_tasks(llm: LLM, user: SimulatedUser, history: list[dict[str, Any]]) -> list[CheckResult]:
    """Ask the LLM to score every task and the tone.

    One result per task, then ``tone`` (shown, not weighed).
    """
    tasks = "\n".join(
        f"{n}. [{t.type}] {t.task} (acceptance criteria: {t.acceptance_criteria})"
        for n, t in enumerate(user.tasks, 1)
    )
    prompt = SCORER_PROMPT.format(
        tasks=tasks, transcript=transcript_text(history), shape=REPLY_SHAPE
    )
    names = [f"task {n}: {t.task}" for n, t in enumerate(user.tasks, 1)]
    try:
        reply = ask(
            llm,
            [{"role": "user", "content": prompt}],
            temperature=user.scorer_temperature,
            response_format={"type": "json_object"},
        )
        scores, tone = read_task_scores(reply, user)
    except Exception as exc:
        why = (
            str(exc)
            if isinstance(exc, ScorerReplyError)
            else f"task scorer LLM call failed: {type(exc).__name__}"
        )
        if not isinstance(exc, ScorerReplyError) and str(exc):
            why += f": {exc}"
        infra = infrastructure_error(exc)
        return [
            CheckResult(
                "tasks",
                False,
                0.0,
                REPLY_SHAPE,
                f"no verdict: {why}",
                why,
                scored=False,
                error=True,
                infra_error=infra,
            )
        ]
    results = [
        CheckResult.of(
            name,
            score > 0.6,  # the home project's mark of a task done; the composite decides the case
            score=score,
            expected=task.acceptance_criteria,
            actual=f"{score:.2f}",
            message=f"scored {score:.2f}",
        )
        for name, task, score in zip(names, user.tasks, scores, strict=True)
    ]
    if tone is not None:
        results.append(
            CheckResult("tone", True, tone, None, f"{tone:.2f}", f"tone {tone:.2f} (not weighed)")
        )
    return results


@dataclass
class Composite:
    """The composite score and every part of it, for the verdict and the failure text."""

    timing: float | None
    tasks: float | None
    assertions: float | None
    assertion_weights: tuple[float, float]
    """Passing weight, total scored weight."""
    penalty: float
    weights: dict[str, float]
    min_score: float
    unscored: list[str]
    """Parts that could not be scored, with why."""
    no_verdict: bool = False
    """Whether a part could not reach a verdict, which leaves no composite.

    Such as an unreadable scorer reply, or an assertion that errored.
    """

    @property
    def value(self) -> float | None:
        """The weighted mean of the scored parts minus the penalty, floored at 0.

        None when tasks have no verdict.
        """
        if self.no_verdict:
            return None
        values: dict[str, float | None] = {
            "timing": self.timing,
            "tasks": self.tasks,
            "assertions": self.assertions,
        }
        parts = [(v, w) for n, w in self.weights.items() if (v := values.get(n)) is not None]
        total = sum(w for _, w in parts)
        if not total:
            return None
        return max(0.0, sum(s * w for s, w in parts) / total - self.penalty)

    def line(self) -> str:
        """The score as one line of text.

        For example:
        ``timing 0.75, tasks 0.80, assertions 0.40 (2/5 by weight), penalty 0.30 → 0.26 < 0.70``.
        """
        parts: list[str] = []
        for name in ("timing", "tasks", "assertions"):
            value = getattr(self, name)
            if (
                value is None
            ):  # not scored (said why), or not part of this conversation (no target, no assertions)
                parts.extend(u for u in self.unscored if u.startswith(name + " "))
                continue
            text = f"{name} {value:.2f}"
            if name == "assertions":
                passing, total = self.assertion_weights
                text += f" ({passing:g}/{total:g} by weight)"
            parts.append(text)
        parts.append(f"penalty {self.penalty:.2f}")
        value = self.value
        if value is None:
            return ", ".join(parts) + " → no composite score"
        verdict = "≥" if value >= self.min_score else "<"
        return ", ".join(parts) + f" → {value:.2f} {verdict} {self.min_score:.2f}"


def timing_score(latencies: list[float], aspirational_s: float | None) -> float | None:
    """min(1, aspirational / mean response time); none without a target or a response."""
    if aspirational_s is None or not latencies:
        return None
    mean = sum(latencies) / len(latencies)
    return 1.0 if mean <= 0 else min(1.0, aspirational_s / mean)


def penalty(failures: int) -> float:
    """The failure penalty: 0.3 per failed agent call, at most 0.5."""
    return min(0.3 * failures, 0.5)
