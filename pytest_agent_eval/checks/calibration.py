"""Calibration sets (SPEC §26): labelled answers that measure a judge; the uncalibrated-judge gate.

A file ``*.calibration.yaml`` / ``.yml`` / ``.json`` / ``.jsonl`` holds items ``{id?, input, output,
reference?, judge | rubric, label}``; ``label`` is ``pass``, ``fail`` or a score in 0..1 (a pass at
the judge's ``min_score``). A YAML/JSON file is ``{judge?: spec, items: [...]}`` (``judge`` is the
items' default judge) or the list of items; a JSON Lines file has one item a line. Each item is a
pytest item that asks its judge (``checks.judge``) and passes when the judge's verdict is the
label's; the reports group the items by judge (the hash of model, prompt and rubric:
:func:`checks.judge.judge_id`) and give the figures of ``checks.agreement``.

:class:`Gate` (``--agent-eval-judge-min-kappa``): a judge whose Cohen's kappa on this run's labelled
items is below the minimum, or that no item labels, is uncalibrated; its verdicts are no verdict.
The gate asks a judge about each of its items once per process (cached, shared with the calibration
items themselves).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agent_eval.checks.agreement import cohen_kappa
from pytest_agent_eval.checks.base import CheckContext, CheckError
from pytest_agent_eval.checks.judge import Verdict, identity, judge_options, verdict
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.document import Document, PathKey, read_document
from pytest_agent_eval.core.errors import EvalFileError
from pytest_agent_eval.core.files import CALIBRATION_SUFFIXES as SUFFIXES
from pytest_agent_eval.core.names import ID_RE
from pytest_agent_eval.core.results import CaseResult, CheckResult, RunRecord, TrialResult
from pytest_agent_eval.llm import LLM

TAG = "calibration"
CHECK = "judge_calibration"
_ITEM_KEYS = ("id", "input", "output", "reference", "judge", "rubric", "label")
_JUDGE_KEYS = ("rubric", "min_score", "prompt", "samples", "reference", "model")


def is_calibration_file(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


@dataclass(frozen=True)
class Labelled:
    """One labelled item: what the judge is shown, its judge, and the label."""

    case: Case
    output: str
    judge: dict[str, Any] | str
    label: bool
    """Pass (``True``) or fail; a score label passes at the judge's ``min_score``."""
    label_score: float | None = None
    judge_id: str = ""
    model: str = ""


@dataclass
class Loaded:
    """A calibration file: its items, and the items that are wrong (each an error item)."""

    items: list[Labelled] = field(default_factory=list)
    broken: list[Case] = field(default_factory=list)


def load(path: Path) -> Loaded:
    """The items of the calibration file ``path``.

    :class:`EvalFileError` when the file as a whole is wrong.
    """
    doc = read_document(path)
    rows, key, default = _rows(doc)
    out = Loaded()
    ids: set[str] = set()
    for index, raw in enumerate(rows):
        where: PathKey = (*key, index)
        line = doc.line(where)
        given = raw.get("id") if isinstance(raw, dict) else None
        case_id = given if isinstance(given, str) and ID_RE.match(given) else f"item-{index + 1}"
        if case_id in ids:
            case_id = f"{case_id}-{index + 1}"
        ids.add(case_id)
        try:
            out.items.append(
                _item(raw, default, Case(id=case_id, path=path, line=line, tags=(TAG,)))
            )
        except ValueError as exc:
            error = EvalFileError(path, line, str(exc), case_id=case_id)
            out.broken.append(
                Case(id=case_id, path=path, line=line, tags=(TAG,), error=error.format())
            )
    return out


def _rows(doc: Document) -> tuple[list[Any], PathKey, Any]:
    data = doc.data
    if isinstance(data, list):
        return data, (), None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        unknown = [k for k in data if k not in ("items", "judge", "name", "description")]
        if unknown:
            raise EvalFileError(
                doc.path,
                doc.line((unknown[0],)),
                f"unknown key {unknown[0]!r}: a calibration file "
                "has `items`, and `judge` (the items' default judge), `name`, `description`",
            )
        return data["items"], ("items",), data.get("judge")
    raise EvalFileError(
        doc.path,
        1,
        "not a calibration set: give `items:` a list of {input, output, judge or rubric, label}",
    )


def _judge(raw: dict[str, Any], default: Any) -> dict[str, Any] | str:
    spec = raw.get("judge", raw.get("rubric", default))
    if "judge" in raw and "rubric" in raw:
        raise ValueError("give `judge:` or `rubric:`, not both")
    if spec is None:
        raise ValueError(
            "no judge: give the item `rubric:` or `judge: {rubric, ...}`, or the file a `judge:`"
        )
    if isinstance(spec, str):
        return spec
    if not isinstance(spec, dict):
        raise ValueError(
            "`judge` must be a rubric or a mapping {rubric, min_score, prompt, samples, model}"
        )
    if "panel" in spec:
        raise ValueError(
            "a panel is calibrated member by member: label items for each member's judge"
        )
    unknown = [k for k in spec if k not in _JUDGE_KEYS]
    if unknown:
        raise ValueError(
            f"unknown key {unknown[0]!r} in `judge`; a judge has {', '.join(_JUDGE_KEYS)}"
        )
    if "rubric" not in spec:
        raise ValueError("the judge has no `rubric`")
    return spec


def _item(raw: Any, default: Any, case: Case) -> Labelled:
    if not isinstance(raw, dict):
        raise ValueError("an item is a mapping {input, output, judge or rubric, label}")
    unknown = [k for k in raw if k not in _ITEM_KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; an item has {', '.join(_ITEM_KEYS)}")
    if not isinstance(raw.get("output"), str):
        raise ValueError("`output` (the answer the judge grades) must be a string")
    if not isinstance(raw.get("input", ""), str):
        raise ValueError("`input` must be a string")
    reference = raw.get("reference")
    if reference is not None and not (
        isinstance(reference, str)
        or (isinstance(reference, list) and all(isinstance(r, str) for r in reference))
    ):
        raise ValueError("`reference` must be a string or a list of facts")
    spec = _judge(raw, default)
    options, _ = judge_options(spec)
    threshold = float(options.get("min_score", 0.7))
    label, score = _label(raw.get("label"), threshold)
    case = Case(
        id=case.id,
        path=case.path,
        line=case.line,
        query=raw.get("input", ""),
        reference=reference,
        tags=case.tags,
    )
    jid, model = identity(spec, case.path.parent)
    return Labelled(case, raw["output"], spec, label, score, jid, model)


def _label(raw: Any, threshold: float) -> tuple[bool, float | None]:
    if raw in ("pass", "fail"):
        return raw == "pass", None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and 0 <= raw <= 1:
        return float(raw) >= threshold, float(raw)
    raise ValueError(f"`label` must be pass, fail or a score from 0 to 1, got {raw!r}")


def ask(item: Labelled, llm: LLM) -> Verdict:
    """The item's judge's verdict on its output (never gated: calibration measures the judge)."""
    ctx = CheckContext(case=item.case, llm=llm)
    return verdict(RunRecord(output=item.output), item.judge, ctx, gated=False)


def result(item: Labelled, found: Verdict | CheckError | None) -> CaseResult:
    """The item's case result: passed when the judge's verdict is the label's.

    ``found`` is the verdict, the reason there is none, or ``None`` without an LLM (not scored).
    """
    label = "pass" if item.label else "fail"
    facts: dict[str, Any] = {"judge": item.judge_id, "model": item.model, "label": label}
    if item.label_score is not None:
        facts["label_score"] = item.label_score
    if found is None:
        from pytest_agent_eval.checks.judge import NO_LLM

        check = CheckResult(
            CHECK, True, 0.0, facts, "not judged", f"not scored: {NO_LLM}", scored=False
        )
    elif isinstance(found, CheckError):
        check = CheckResult(
            CHECK, False, 0.0, facts, None, f"no verdict: {found}", scored=False, error=True
        )
    else:
        judged = "pass" if found.passed else "fail"
        agrees = found.passed == item.label
        check = CheckResult.of(
            CHECK,
            agrees,
            expected=facts,
            actual={
                **facts,
                "judged": judged,
                "score": round(found.score, 6),
                "reason": found.reason,
            },
            message=""
            if agrees
            else f"the judge said {judged} ({found.score:.2f}: {found.reason}); labelled {label}",
        )
    run = RunRecord(output=item.output)
    reasons = [] if check.passed else [f"{CHECK}: {check.message}"]
    trial = TrialResult(run, [check], check.passed and not check.error, check.score, reasons)
    return CaseResult(item.case, [trial], trial.passed, trial.score)


class Gate:
    """``--agent-eval-judge-min-kappa``: which judges are calibrated in this run.

    Process-wide, for the session; thread-safe (checks run in worker threads).
    """

    def __init__(self, min_kappa: float) -> None:
        self.min_kappa = min_kappa
        self.items: dict[str, list[Labelled]] = {}
        self._verdicts: dict[tuple[str, str, int], Verdict | CheckError] = {}
        self._lock = threading.RLock()

    def add(self, items: list[Labelled]) -> None:
        with self._lock:
            for item in items:
                self.items.setdefault(item.judge_id, []).append(item)

    def verdict(self, item: Labelled, llm: LLM) -> Verdict | CheckError:
        """The item's verdict, asked once per process."""
        key = (str(item.case.path), item.case.id, item.case.line)
        with self._lock:
            found = self._verdicts.get(key)
            if found is None:
                try:
                    found = ask(item, llm)
                except CheckError as exc:
                    found = exc
                self._verdicts[key] = found
            return found

    def why(self, judge: str, ctx: CheckContext) -> str | None:
        """Why ``judge`` is uncalibrated in this run.

        ``None`` when its kappa reaches the minimum.
        """
        items = self.items.get(judge, [])
        if not items:
            return (
                "no calibration item of this run labels it "
                f"(--agent-eval-judge-min-kappa {self.min_kappa:g}); add "
                "a *.calibration.yaml whose items use the same model, prompt and rubric"
            )
        if ctx.llm is None:
            return "no LLM to calibrate it with"
        pairs = []
        for item in items:
            found = self.verdict(item, ctx.llm)
            if isinstance(found, Verdict):
                pairs.append((found.passed, item.label))
        kappa = cohen_kappa(pairs)
        if kappa is None:
            return (
                f"Cohen's kappa cannot be had from its {len(pairs)} labelled items "
                "with a verdict (one class only)"
            )
        if kappa < self.min_kappa:
            return f"Cohen's kappa {kappa:.2f} < {self.min_kappa:g} on {len(pairs)} labelled items"
        return None
