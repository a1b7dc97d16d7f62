"""The suite's limits (SPEC §10) and how a run's figures are judged against them.

Plain Python, no pytest: the run (``report/thresholds.py``) and ``agent-eval gate`` judge with the
same code.

A threshold that cannot be told (no cost reported, no latency measured) is not checked and says so:
it never fails or passes a run on a made-up figure. A cost that leaves out cases whose models have
no price is a lower bound: over the limit it fails the run; within it, the limit is not checked, and
the line names those models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pytest_agent_eval.report.stats import Stats


class Thresholds(NamedTuple):
    """The suite's limits; ``None``: not set."""

    min_pass_rate: float | None = None
    max_cost: float | None = None
    max_p95_latency_s: float | None = None

    def __bool__(self) -> bool:
        return any(
            v is not None for v in (self.min_pass_rate, self.max_cost, self.max_p95_latency_s)
        )

    def check(self, stats: Stats) -> tuple[list[str], list[str]]:
        """``(missed, not checked)``.

        One line for each threshold the figures miss or cannot tell.
        """
        missed: list[str] = []
        unknown: list[str] = []
        decided = stats.passed + stats.failed + stats.errors
        if self.min_pass_rate is not None:
            if decided:
                rate = stats.passed / decided
                if rate < self.min_pass_rate:
                    missed.append(
                        f"pass rate {rate:.2f} ({stats.passed}/{decided}) "
                        f"< agent_eval_min_pass_rate {self.min_pass_rate:g}"
                    )
            else:
                unknown.append("agent_eval_min_pass_rate: no case passed or failed")
        if self.max_cost is not None:
            partial = stats.partial_cost
            fix = "give their prices in agent_eval_prices"
            if stats.cost is None and partial is not None:
                unknown.append(f"agent_eval_max_cost: no cost known ({partial}; {fix})")
            elif stats.cost is None:
                unknown.append(
                    "agent_eval_max_cost: no cost reported "
                    "(turn on the traffic hook or report usage)"
                )
            elif (
                stats.cost > self.max_cost
            ):  # a partial sum over the limit: the whole one is over it too
                shown = f"{stats.cost:.4f}" + (
                    f" (partial: {partial})" if partial is not None else ""
                )
                missed.append(f"cost {shown} > agent_eval_max_cost {self.max_cost:g}")
            elif partial is not None:
                unknown.append(
                    f"agent_eval_max_cost: the known cost {stats.cost:.4f} "
                    f"is within {self.max_cost:g}, but it leaves out {partial} ({fix})"
                )
        if self.max_p95_latency_s is not None:
            if stats.latency_p95 is None:
                unknown.append("agent_eval_max_p95_latency_s: no agent latency measured")
            elif stats.latency_p95 > self.max_p95_latency_s:
                missed.append(
                    f"latency p95 {stats.latency_p95:.2f} s "
                    f"> agent_eval_max_p95_latency_s {self.max_p95_latency_s:g}"
                )
        return missed, unknown
