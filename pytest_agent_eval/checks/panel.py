"""A panel of judges (SPEC §26): ``judge: {panel: [specs], vote: majority|all|any}``.

Each member is a judge of its own (a rubric, or ``{rubric, min_score, prompt, samples, reference,
model}``); what a member leaves out it takes from the panel (``rubric``, ``min_score``,
``reference``, ...). The members vote pass or fail; the panel passes by ``majority`` (more than
half), ``all`` or ``any``. A member without a verdict (an unreadable reply, a failed call, an
uncalibrated judge) counts only when the others cannot decide without it: then the panel has no
verdict either. The result's ``actual`` holds each member's verdict and the members' agreement on
the case (the share of agreeing member pairs, 0..1).
"""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.checks.agreement import item_agreement
from pytest_agent_eval.checks.base import CheckContext, CheckError
from pytest_agent_eval.checks.judge import NO_LLM, judge_options, verdict
from pytest_agent_eval.core.results import CheckResult, RunRecord

VOTES = ("majority", "all", "any")
_SHARED = ("rubric", "min_score", "prompt", "samples", "reference", "model")


def member_spec(panel: dict[str, Any], member: Any) -> dict[str, Any]:
    """A member's judge: its own settings over the panel's."""
    shared = {key: panel[key] for key in _SHARED if key in panel}
    own = {"rubric": member} if isinstance(member, str) else dict(member)
    return {**shared, **own}


def decide(vote: str, passes: int, fails: int, unknown: int) -> bool | None:
    """The panel's verdict from its members' votes.

    ``None`` when the members without a verdict could swing it.
    """

    def outcome(p: int, f: int) -> bool:
        if vote == "all":
            return f == 0
        if vote == "any":
            return p > 0
        return p > (p + f) / 2

    best, worst = outcome(passes + unknown, fails), outcome(passes, fails + unknown)
    return best if best == worst else None


def panel(run: RunRecord, spec: dict[str, Any], ctx: CheckContext) -> CheckResult:
    """The panel's verdict on ``run``; see the module's docstring."""
    vote = spec.get("vote", "majority")
    members = [member_spec(spec, member) for member in spec["panel"]]
    _, rubric = judge_options(spec) if "rubric" in spec else (None, "a panel of judges")
    if ctx.llm is None:
        return CheckResult(
            "judge", True, 0.0, rubric, "not judged", f"not scored: {NO_LLM}", scored=False
        )
    seen: list[dict[str, Any]] = []
    for n, member in enumerate(members, 1):
        try:
            found = verdict(run, member, ctx)
        except CheckError as exc:
            seen.append({"member": n, "verdict": None, "error": str(exc)})
            continue
        seen.append(
            {
                "member": n,
                "judge": found.judge,
                "model": found.model,
                "score": round(found.score, 6),
                "verdict": "pass" if found.passed else "fail",
                "reason": found.reason,
            }
        )
    votes = [entry["verdict"] == "pass" for entry in seen if entry["verdict"] is not None]
    unknown = len(seen) - len(votes)
    agreement = item_agreement(votes)
    actual = {"vote": vote, "members": seen, "agreement": agreement}
    decided = decide(vote, sum(votes), len(votes) - sum(votes), unknown)
    counts = f"{sum(votes)} pass, {len(votes) - sum(votes)} fail" + (
        f", {unknown} no verdict" if unknown else ""
    )
    if decided is None:
        errors = "; ".join(
            f"member {e['member']}: {e['error']}" for e in seen if e["verdict"] is None
        )
        raise CheckError(f"judge panel ({vote}) has no verdict: {counts}; {errors}")
    scores = [float(e["score"]) for e in seen if e["verdict"] is not None]
    score = sum(scores) / len(scores) if scores else 0.0
    return CheckResult.of(
        "judge",
        decided,
        score=score,
        expected=f"{vote} of {len(members)} judges pass: {rubric}",
        actual=actual,
        message="" if decided else f"judge panel ({vote}) failed the answer: {counts}",
    )
