"""Agreement statistics for judges (SPEC §26): of a judge with labels, and of a panel's members.

Of a judge with labels: accuracy, Cohen's kappa, Spearman's rho, confusion counts, false-pass rate;
of a panel's members with each other: Fleiss' kappa; with seeded percentile bootstrap intervals.
Plain Python; a figure that cannot be had from the data is ``None``, never made up.

* Cohen's kappa: (p_o - p_e) / (1 - p_e) over pass/fail, p_e from the two marginals; ``None`` when
  p_e is 1.
* Spearman's rho: Pearson's correlation of the average ranks (ties share their mean rank); ``None``
  with fewer than 3 pairs or a constant side.
* Fleiss' kappa over items rated by the same number n >= 2 of raters: (P̄ - P̄e) / (1 - P̄e), where
  P_i is item i's share of agreeing rater pairs and P̄e the sum of the squared category shares;
  ``agreement`` is P̄ (0..1).
* The bootstrap: items drawn with replacement ``RESAMPLES`` times from a ``random.Random(SEED)``,
  the statistic of each resample where it is defined, the 2.5th and 97.5th percentiles; ``None``
  when fewer than half are defined.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

RESAMPLES = 2000
SEED = 26
LEVEL = 0.95
T = TypeVar("T")


@dataclass(frozen=True)
class Confusion:
    """Judged pass/fail against labelled pass/fail; "positive" is pass."""

    true_pass: int
    false_pass: int
    """Judged pass, labelled fail: what a gate must not let through."""
    true_fail: int
    false_fail: int

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool]]) -> Confusion:
        """From ``(judged pass, labelled pass)`` pairs."""
        counts = [0, 0, 0, 0]
        for judged, label in pairs:
            counts[(0 if label else 1) if judged else (2 if not label else 3)] += 1
        return cls(*counts)

    @property
    def total(self) -> int:
        return self.true_pass + self.false_pass + self.true_fail + self.false_fail


def accuracy(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """The share of ``(judged, label)`` pairs that agree."""
    return sum(j == lab for j, lab in pairs) / len(pairs) if pairs else None


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of judged pass/fail against labelled pass/fail."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(j == lab for j, lab in pairs) / n
    judged = sum(j for j, _ in pairs) / n
    labelled = sum(lab for _, lab in pairs) / n
    expected = judged * labelled + (1 - judged) * (1 - labelled)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def false_pass_rate(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Judged pass among the items labelled fail."""
    failing = [j for j, lab in pairs if not lab]
    return sum(failing) / len(failing) if failing else None


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Spearman's rho of ``(judged score, labelled score)`` pairs."""
    if len(pairs) < 3:
        return None
    x, y = _ranks([a for a, _ in pairs]), _ranks([b for _, b in pairs])
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def item_agreement(votes: Sequence[bool]) -> float | None:
    """The share of agreeing pairs among one item's pass/fail ``votes`` (0..1).

    ``None`` with fewer than 2 votes.
    """
    n = len(votes)
    if n < 2:
        return None
    passes = sum(votes)
    return (passes * (passes - 1) + (n - passes) * (n - passes - 1)) / (n * (n - 1))


@dataclass(frozen=True)
class Fleiss:
    """Agreement of a panel over its items: ``agreement`` P̄ (0..1) and Fleiss' ``kappa``.

    ``kappa`` is ``None`` when chance agreement is total: every vote the same.
    """

    items: int
    raters: int
    agreement: float
    kappa: float | None


def fleiss(items: Sequence[Sequence[bool]]) -> Fleiss | None:
    """Fleiss' kappa of pass/fail votes, items each rated by the same number (>= 2) of raters.

    ``None`` else.
    """
    if not items or len({len(votes) for votes in items}) != 1 or len(items[0]) < 2:
        return None
    n = len(items[0])
    shares = [item_agreement(votes) or 0.0 for votes in items]
    mean = sum(shares) / len(items)
    passing = sum(sum(votes) for votes in items) / (len(items) * n)
    chance = passing**2 + (1 - passing) ** 2
    kappa = None if chance >= 1.0 else (mean - chance) / (1 - chance)
    return Fleiss(len(items), n, mean, kappa)


def bootstrap(
    items: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """The ``level`` percentile bootstrap interval of ``statistic`` over ``items``.

    The items are resampled with replacement.
    """
    n = len(items)
    if n == 0:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        value = statistic([items[rng.randrange(n)] for _ in range(n)])
        if value is not None:
            values.append(value)
    if len(values) < resamples / 2:
        return None
    values.sort()
    tail = (1.0 - level) / 2
    return values[int(tail * len(values))], values[
        min(len(values) - 1, int((1.0 - tail) * len(values)))
    ]
