"""The ``judge`` check: an LLM scores the answer against a rubric (SPEC §8).

The judge asks for JSON (``response_format`` JSON where the ``agent_eval_llm`` callable takes
options) and reads the reply as that JSON, else only in forms that cannot be misread (``7/10``,
``70%``, ``score: 0.7``). Anything else, a score outside [0, 1], or an LLM call that fails, is no
verdict: the check errors, it never passes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pytest_agent_eval.checks.base import CheckContext, CheckError, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord
from pytest_agent_eval.imports import import_object
from pytest_agent_eval.llm import accepted, ask, prompt_json

NO_LLM = (
    "no LLM configured for the judge: set AGENT_EVAL_LLM_MODEL "
    "(with OPENAI_API_KEY / OPENAI_BASE_URL and the "
    "`openai` extra), or override the `agent_eval_llm` fixture in conftest.py"
)
REPLY_FORMAT = 'Reply with JSON only: {"score": <number from 0 to 1>, "reason": "<one sentence>"}'
PROMPT = """You grade an AI agent's answer against a rubric.
Rubric: {rubric}
User input: {input}
Tool calls the agent made: {tool_calls}
{transcript}{reference}Agent answer: {output}
""" + REPLY_FORMAT.replace("{", "{{").replace("}", "}}")
FIELDS = ("rubric", "input", "output", "tool_calls", "transcript", "reference")
"""The fields of a prompt template (``prompt: path``).

A literal brace is written ``{{`` / ``}}``.
"""
REFERENCE_RUBRIC = (
    "The answer agrees with the reference: it states what the reference states and contradicts"
    " none of it."
)
"""The rubric of a judge given only a reference."""
JSON_OPTIONS: dict[str, Any] = {"response_format": {"type": "json_object"}}
SAMPLE_TEMPERATURE = 1.0
"""The temperature of each sample when ``samples`` > 1.

At the default 0 every sample would be the same.
"""

_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)
_NUM = r"(\d+(?:\.\d+)?)"
_FORMS = (  # (pattern, divisor): the only non-JSON forms read, each unambiguous on its own
    (re.compile(rf"(?<![\w./]){_NUM}\s*/\s*(10|100)(?![\w/]|\.\d)"), None),
    (re.compile(rf"(?<![\w.]){_NUM}\s*%"), 100.0),
    (re.compile(rf"\bscore\b\s*(?:[:=]|is|of)\s*{_NUM}(?!\s*(?:/|%|\d|\.\d))", re.IGNORECASE), 1.0),
)


def excerpt(reply: str, limit: int = 200) -> str:
    """The reply on one line, cut at ``limit`` characters."""
    text = " ".join(reply.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unreadable(reply: str, why: str = "") -> CheckError:
    """The error of a reply that gives no score (``why``: what was wrong with it)."""
    note = f" ({why})" if why else ""
    return CheckError(
        f"judge reply unreadable{note}: {excerpt(reply)!r}; the judge must reply "
        '{"score": <0..1>, "reason": "..."} (or 7/10, 70%, score: 0.7)'
    )


def _json_score(data: Any, reply: str) -> tuple[float, str]:
    if not isinstance(data, dict) or "score" not in data:
        raise unreadable(reply, "JSON without a `score`")
    value = data["score"]
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise unreadable(reply, "the score is not a number")
    try:
        score = float(value)
    except ValueError:
        raise unreadable(reply, "the score is not a number") from None
    if not 0.0 <= score <= 1.0:
        raise unreadable(reply, f"score {value} is outside 0..1")
    return score, str(data.get("reason", "")).strip()


def _json_objects(text: str) -> list[Any]:
    """Every JSON object in ``text`` that has a ``score`` key."""
    decoder = json.JSONDecoder()
    found = []
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and "score" in value:
            found.append(value)
    return found


def _plain_score(reply: str) -> float:
    """The one score the reply gives as ``7/10``, ``70%`` or ``score: 0.7``.

    Else the reply is unreadable.
    """
    values: set[float] = set()
    for pattern, divisor in _FORMS:
        for match in pattern.finditer(reply):
            number = float(match.group(1))
            value = number / (divisor if divisor is not None else float(match.group(2)))
            if not 0.0 <= value <= 1.0:
                raise unreadable(reply, f"{match.group(0).strip()!r} is outside 0..1")
            values.add(round(value, 9))
    if len(values) > 1:
        raise unreadable(
            reply, "it gives several scores: " + ", ".join(f"{v:g}" for v in sorted(values))
        )
    if not values:
        raise unreadable(reply)
    return values.pop()


def read_score(reply: str) -> tuple[float, str]:
    """The score in [0, 1] and the reason from a judge's reply.

    :class:`CheckError` when there is none.
    """
    text = reply.strip()
    fenced = _FENCE.search(text)
    for candidate in ([fenced.group(1).strip()] if fenced else []) + [text]:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        return _json_score(data, reply)
    objects = _json_objects(text)
    if objects:
        scores = [_json_score(data, reply) for data in objects]
        if len({score for score, _ in scores}) > 1:
            raise unreadable(reply, "it gives several scores")
        return scores[0]
    return _plain_score(text), excerpt(text)


class Judgments(Protocol):
    """The judge-verdict cache (SPEC §25), as the judge asks it: replies by :func:`judgment_key`."""

    def get(self, key: str) -> list[str] | None:
        """The replies stored under ``key``; ``None`` for a miss."""

    def put(self, key: str, model: str, replies: list[str]) -> None:
        """Keep the replies the LLM gave (all of them read)."""

    def distrust(self, key: str, why: str) -> None:
        """The replies of ``key`` cannot be trusted (``why``): they were asked again."""


JUDGMENTS: Judgments | None = None
"""Process-wide, set by ``--agent-eval-cache`` (``plugin.cache``) for the session: judgments
already paid for.
"""


def judgment_key(model: str, prompt: str, samples: int, options: dict[str, Any]) -> str:
    """A judgment's key: a SHA-256 of the judge's model, prompt, samples and options.

    The prompt as sent: the rubric, the output, the reference and all else the judge is shown.
    """
    text = json.dumps(
        [model, prompt, samples, options], sort_keys=True, ensure_ascii=False, default=repr
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ask_score(
    ctx: CheckContext, prompt: str, samples: int = 1, model: str | None = None
) -> tuple[float, str]:
    """The mean score of ``samples`` LLM replies to ``prompt`` and their reasons.

    :class:`CheckError` if one fails. ``model``: asked of the LLM as its ``model`` option (a panel
    member's own model). With the judge cache, replies to the same prompt of the same model are
    asked once: a judge whose model is not known (an ``agent_eval_llm`` of the user's, without
    ``AGENT_EVAL_LLM_MODEL`` or a ``model:``) is not cached.
    """
    assert ctx.llm is not None
    options = dict(JSON_OPTIONS)
    if model is not None:
        if "model" not in accepted(ctx.llm, {"model": model}):
            raise CheckError(
                f"the judge's model {model!r} cannot be asked: "
                "the agent_eval_llm callable takes no `model` option "
                "(give it a `model` keyword or **options)"
            )
        options["model"] = model
    if samples > 1:
        options["temperature"] = SAMPLE_TEMPERATURE
    cache, key = JUDGMENTS, None
    name = model or os.environ.get("AGENT_EVAL_LLM_MODEL")
    if cache is not None and name:
        key = judgment_key(name, prompt, samples, options)
        kept = cache.get(key)
        if kept is not None:
            try:
                if len(kept) != samples:
                    raise unreadable(str(kept), f"{len(kept)} replies, not {samples}")
                return _mean([read_score(reply) for reply in kept])
            except CheckError as exc:  # a garbled row: asked again, never a verdict
                cache.distrust(key, str(exc))
    readings, replies = [], []
    for _ in range(samples):
        try:
            reply = ask(ctx.llm, [{"role": "user", "content": prompt}], **options)
        except Exception as exc:
            text = str(exc)
            raise CheckError(
                f"judge LLM call failed: {type(exc).__name__}" + (f": {text}" if text else "")
            ) from exc
        readings.append(read_score(reply))
        replies.append(reply)
    if cache is not None and key is not None and name:
        cache.put(key, name, replies)
    return _mean(readings)


def _mean(readings: list[tuple[float, str]]) -> tuple[float, str]:
    """The mean score of the readings of a judge's samples and their reasons."""
    if len(readings) == 1:
        return readings[0]
    score = sum(s for s, _ in readings) / len(readings)
    reasons = "; ".join(f"{s:.2f}: {r}" for s, r in readings)
    return score, f"mean of {len(readings)} samples ({reasons})"


def reference_text(reference: str | list[str] | None, any_of: bool = False) -> str:
    """The prompt's lines for what the answer is compared with.

    That is a reference answer, alternative answers (``any_of``) or facts (a list).
    """
    if reference is None:
        return ""
    if isinstance(reference, str):
        return f"Reference answer (the answer is correct when it agrees with it): {reference}\n"
    if any_of:
        answers = "\n".join(f"  - {answer}" for answer in reference)
        return (
            "Reference answers (the answer is correct when it agrees with any one of them):\n"
            f"{answers}\n"
        )
    facts = "\n".join(f"  - {fact}" for fact in reference)
    return f"Facts the answer must agree with:\n{facts}\n"


def prompt_fields(
    run: RunRecord, ctx: CheckContext, rubric: str, reference: str | list[str] | None = None
) -> dict[str, str]:
    """What the judge is shown.

    That is the rubric, the input, the answer, the tool calls, (conversations) the turns and the
    reference answer or facts when there are some.
    """
    calls = [{"tool": c.name, "args": c.args} for c in run.tool_calls]
    turns = "\n".join(f"  {m.get('role', '?')}: {m.get('content', '')}" for m in run.history)
    return {
        "rubric": rubric,
        "input": ctx.case.query or ("(a conversation, below)" if run.history else "(none)"),
        "output": run.output,
        "tool_calls": prompt_json(calls) if calls else "(none)",
        "transcript": f"Conversation:\n{turns}\n" if turns else "",
        "reference": reference_text(
            reference, reference is ctx.case.reference and ctx.case.reference_any
        ),
    }


def _own_prompt(ref: str, fields: dict[str, str], run: RunRecord, ctx: CheckContext) -> str:
    """The prompt from ``prompt: module:function`` or a template file.

    The function is called with the run, the case, the rubric.
    """
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", ref):
        func = import_object(ref)
        return str(func(run, ctx.case, fields["rubric"]))
    path = Path(ref) if Path(ref).is_absolute() else ctx.case.path.parent / ref
    try:
        template = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CheckError(
            f"judge prompt {ref!r}: cannot read {path}: {exc.strerror or exc}"
        ) from exc
    try:
        return template.format_map(fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise CheckError(
            f"judge prompt {path}: bad template ({type(exc).__name__}: {exc}); its fields are "
            + ", ".join("{" + f + "}" for f in FIELDS)
            + "; write a literal brace as {{ or }}"
        ) from exc


UNCALIBRATED: Callable[[str, CheckContext], str | None] | None = None
"""The calibration gate's question: given a judge's id, why it is uncalibrated in this run, or None.

Process-wide, set by ``--agent-eval-judge-min-kappa`` (``plugin.calibration``) for the session. The
verdicts of an uncalibrated judge are no verdict.
"""


def judge_model(options: dict[str, Any]) -> str:
    """The model a judge asks.

    That is its ``model``, else ``AGENT_EVAL_LLM_MODEL``, else the ``agent_eval_llm`` fixture's.
    """
    return str(options.get("model") or os.environ.get("AGENT_EVAL_LLM_MODEL") or "agent_eval_llm")


def judge_id(model: str, prompt: str, rubric: str) -> str:
    """A judge's identity: 12 hex digits of a hash of its model, prompt (template) and rubric."""
    text = json.dumps([model, prompt, rubric], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _prompt_identity(ref: str | None, base: Path) -> str:
    """What identifies the prompt.

    That is the built-in template, a ``module:function``, or a template file's text.
    """
    if ref is None:
        return PROMPT
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", ref):
        return ref
    path = Path(ref) if Path(ref).is_absolute() else base / ref
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ref  # reading it for the verdict says what is wrong


@dataclass(frozen=True)
class Verdict:
    """One judge's verdict: its score, reason and pass at its threshold, and which judge it was."""

    score: float
    reason: str
    passed: bool
    threshold: float
    rubric: str
    judge: str
    """:func:`judge_id`."""
    model: str


def judge_options(spec: Any) -> tuple[dict[str, Any], str]:
    """A judge spec's options and its rubric (a string spec is the rubric)."""
    options = spec if isinstance(spec, dict) else {}
    rubric = spec if isinstance(spec, str) else spec.get("rubric", REFERENCE_RUBRIC)
    return options, rubric


def identity(spec: Any, base: Path) -> tuple[str, str]:
    """The judge's id and model, without asking it."""
    options, rubric = judge_options(spec)
    model = judge_model(options)
    return judge_id(model, _prompt_identity(options.get("prompt"), base), rubric), model


def verdict(run: RunRecord, spec: Any, ctx: CheckContext, gated: bool = True) -> Verdict:
    """The judge ``spec``'s verdict on ``run``.

    :class:`CheckError` when it has none (an unreadable reply, a failed call, or, ``gated``, a judge
    uncalibrated in this run).
    """
    options, rubric = judge_options(spec)
    reference = options.get("reference", ctx.case.reference)
    threshold = float(options.get("min_score", 0.7))
    model = judge_model(options)
    own = options.get("prompt")
    jid = judge_id(model, _prompt_identity(own, ctx.case.path.parent), rubric)
    if gated and UNCALIBRATED is not None:
        why = UNCALIBRATED(jid, ctx)
        if why is not None:
            raise CheckError(f"judge {jid} ({model}) is uncalibrated: {why}")
    fields = prompt_fields(run, ctx, rubric, reference)
    prompt = PROMPT.format_map(fields) if own is None else _own_prompt(own, fields, run, ctx)
    score, reason = ask_score(ctx, prompt, int(options.get("samples", 1)), options.get("model"))
    return Verdict(score, reason, score >= threshold, threshold, rubric, jid, model)


def judge(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """An LLM judge scores the answer against the rubric at least ``min_score`` (default 0.7).

    With a reference (the judge's ``reference``, else the case's ``reference:``), the judge compares
    the answer with it; with a ``panel``, its members vote (``checks.panel``).
    """
    options, rubric = judge_options(spec)
    if "panel" in options:
        from pytest_agent_eval.checks.panel import panel

        return panel(run, options, ctx)
    reference = options.get("reference", ctx.case.reference)
    if ctx.llm is None:
        return CheckResult(
            "judge", True, 0.0, rubric, "not judged", f"not scored: {NO_LLM}", scored=False
        )
    found = verdict(run, spec, ctx)
    score, reason, ok, threshold = found.score, found.reason, found.passed, found.threshold
    against = (
        ""
        if reference is None
        else " (reference: "
        f"{excerpt(str(reference) if isinstance(reference, str) else '; '.join(reference), 80)})"
    )
    return CheckResult.of(
        "judge",
        ok,
        score=score,
        expected=f"score >= {threshold:g}: {rubric}{against}",
        actual=f"{score:.2f}: {reason}",
        message="" if ok else f"judge scored {score:.2f} < {threshold:g}: {reason}",
    )


_REFERENCE = {
    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    "description": (
        "a reference answer, or facts, to compare the answer with (else the case's `reference`)"
    ),
}
_ONE = {
    "rubric": {"type": "string"},
    "min_score": {"type": "number", "minimum": 0, "maximum": 1},
    "prompt": {"type": "string", "minLength": 1},
    "samples": {"type": "integer", "minimum": 1},
    "reference": _REFERENCE,
    "model": {
        "type": "string",
        "minLength": 1,
        "description": "the model the judge asks (the LLM's `model` option)",
    },
}
# a panel member: a rubric, or a judge of its own (what it leaves out, it takes from the panel)
MEMBER = {
    "type": ["string", "object"],
    "properties": _ONE,
    "additionalProperties": False,
}
# a rubric, or {rubric, min_score, prompt, samples, reference, model}, or a panel of such judges
SCHEMA = {
    "type": ["string", "object"],
    "properties": {
        **_ONE,
        "panel": {
            "type": "array",
            "minItems": 2,
            "items": MEMBER,
            "description": "judges that vote",
        },
        "vote": {
            "enum": ["majority", "all", "any"],
            "description": "how a panel decides (default majority)",
        },
    },
    "anyOf": [{"required": ["rubric"]}, {"required": ["reference"]}, {"required": ["panel"]}],
    "additionalProperties": False,
}


def register(registry: CheckRegistry) -> None:
    registry.register(
        "judge", judge, SCHEMA, "an LLM judge scores the answer against the rubric", uses_llm=True
    )
