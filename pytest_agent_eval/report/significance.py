"""Statistics of repeated and paired runs (SPEC §20): pass@k, pass^k and the suite-level test.

Pass@k and pass^k of a repeated case, and the suite-level comparison with a baseline — the exact
McNemar test on the cases that flipped and a bootstrap interval of the pass-rate change. Plain
Python (``math.comb``, a seeded ``random.Random``), no pytest, no numpy.

* pass@k = 1 - C(n-c, k) / C(n, k): the chance that at least one of k trials drawn from the n run
  passes; pass^k = C(c, k) / C(n, k): the chance that all k pass (unbiased estimators from n trials
  with c passes).
* McNemar, exact and two-sided: of the b + c discordant cases (b passed in the baseline and fail
  now, "harmful"; c the other way, "beneficial"), p = min(1, 2 · P(X <= min(b, c))) with X ~
  Binomial(b + c, 1/2).
* The interval: the change candidate − baseline of the pass rate (passing trials over trials), 95%
  percentile bootstrap over cases — each resample draws cases with replacement and keeps every trial
  of a drawn case on both sides — seeded, so a report reads the same each time it is made.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from math import comb
from typing import Any

RESAMPLES = 2000
SEED = 20
LEVEL = 0.95


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The unbiased pass@k from ``n`` trials with ``c`` passes.

    ``None`` when ``k`` is not in 1..n.
    """
    if not 1 <= k <= n:
        return None
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """The unbiased pass^k (all of k trials pass) from ``n`` trials with ``c`` passes.

    ``None`` when ``k`` is not in 1..n.
    """
    if not 1 <= k <= n:
        return None
    return comb(c, k) / comb(n, k)


def mcnemar_exact(harmful: int, beneficial: int) -> float:
    """The two-sided exact McNemar p-value of the cases that flipped.

    ``harmful``: the pass→fail cases; ``beneficial``: the fail→pass cases.
    """
    discordant = harmful + beneficial
    if discordant == 0:
        return 1.0
    tail = sum(comb(discordant, i) for i in range(min(harmful, beneficial) + 1)) / (1 << discordant)
    return min(1.0, 2 * tail)


Pair = tuple[tuple[int, int], tuple[int, int]]
"""One case on both sides: its passes and trials in the baseline and in the candidate.

``((baseline passes, baseline trials), (candidate passes, candidate trials))``.
"""


def _change(pairs: list[Pair]) -> float:
    base_passes = sum(b[0] for b, _ in pairs)
    base_trials = sum(b[1] for b, _ in pairs)
    cand_passes = sum(c[0] for _, c in pairs)
    cand_trials = sum(c[1] for _, c in pairs)
    return cand_passes / cand_trials - base_passes / base_trials


def bootstrap_interval(
    pairs: list[Pair], resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> tuple[float, float]:
    """The ``level`` percentile bootstrap interval of the pass-rate change over ``pairs``.

    Cases are resampled with replacement, each case's trials kept together on both sides.
    """
    rng = random.Random(seed)
    n = len(pairs)
    changes = sorted(_change([pairs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    tail = (1.0 - level) / 2
    low = changes[int(tail * resamples)]
    high = changes[min(resamples - 1, int((1.0 - tail) * resamples))]
    return low, high


@dataclass(frozen=True)
class SuiteTest:
    """The suite-level comparison of the cases both runs decided.

    A decided case passed or failed/errored on each side.
    """

    cases: int
    base_passed: int
    passed: int
    harmful: int
    """Cases that passed in the baseline and fail now."""
    beneficial: int
    """Cases that failed in the baseline and pass now."""
    p_value: float
    """The two-sided exact McNemar test on the ``harmful`` and ``beneficial`` cases."""
    change: float
    """Candidate − baseline pass rate (passing trials over trials), as a fraction."""
    low: float
    high: float
    """The 95% bootstrap interval of ``change``."""
    resamples: int = RESAMPLES
    seed: int = SEED

    @classmethod
    def of(cls, decided: list[tuple[bool, bool, Pair]]) -> SuiteTest | None:
        """The test from each case's ``(passed in the baseline, passes now, its trial counts)``.

        ``None`` without cases.
        """
        if not decided:
            return None
        harmful = sum(before and not after for before, after, _ in decided)
        beneficial = sum(after and not before for before, after, _ in decided)
        pairs = [pair for _, _, pair in decided]
        low, high = bootstrap_interval(pairs)
        return cls(
            cases=len(decided),
            base_passed=sum(before for before, _, _ in decided),
            passed=sum(after for _, after, _ in decided),
            harmful=harmful,
            beneficial=beneficial,
            p_value=mcnemar_exact(harmful, beneficial),
            change=_change(pairs),
            low=low,
            high=high,
        )

    def dropped(self, significance: float) -> bool:
        """Whether the pass rate dropped significantly.

        It did with more harmful than beneficial flips and McNemar p below ``significance``.
        """
        return self.harmful > self.beneficial and self.p_value < significance

    def line(self) -> str:
        """The suite-level test as one line of text.

        ``suite: 8/10 -> 6/10 cases passed; McNemar 3 harmful, 1 beneficial, p = 0.625; pass rate
        of trials -20.0 pp (95% CI -45.0 pp to +5.0 pp, bootstrap over cases)``: cases (a repeated
        case passes by its ``min_pass_rate``) and trials (every run of every case) named as such, as
        they differ when cases repeat.
        """
        return (
            f"suite: {self.base_passed}/{self.cases} -> {self.passed}/{self.cases} cases passed; "
            f"McNemar {self.harmful} harmful, {self.beneficial} beneficial, "
            f"p = {self.p_value:.3g}; pass rate of trials "
            f"{_pp(self.change)} (95% CI {_pp(self.low)} to {_pp(self.high)}, bootstrap over cases)"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuiteTest:
        return cls(**data)


def _pp(fraction: float) -> str:
    return f"{fraction * 100:+.1f} pp"


Z95 = 1.959963984540054
"""The 97.5th percentile of the standard normal distribution."""


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval (95% by default) of a proportion; ``None`` without trials."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * ((p * (1 - p) / trials + z * z / (4 * trials * trials)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
