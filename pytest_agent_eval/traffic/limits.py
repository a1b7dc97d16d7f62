"""The written budgets: requests and tokens per period, kept by the run's pace.

``--agent-eval-rate-limit 500/min`` (requests) and ``--agent-eval-token-limit`` (tokens), kept by
the run's pace (``pace``) through its shared store (``store``): the file in the run's cache
directory on one machine, Redis across machines. Requests wait for the budget; they are never failed
for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {
    "s": 1000,
    "sec": 1000,
    "second": 1000,
    "min": 60_000,
    "minute": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
}
_BUDGET = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)\s*$")
GUARD = 0.02
"""The budget's window is lengthened by 2% of it (20 ms of a second, 1.2 s of a minute): a request
reaches the server a little after its permit's time, by a varying delay, and without the guard two
such delays could put one request more in a window of the budget's length. More would waste the
budget (issue 26: a fixed 10% lost a tenth of it).
"""


@dataclass(frozen=True)
class Budget:
    """``limit`` per ``interval_ms``, written ``N/s``, ``N/min`` or ``N/h``."""

    limit: int
    interval_ms: int
    text: str

    @classmethod
    def parse(cls, text: str, option: str) -> Budget:
        match = _BUDGET.match(text.lower())
        if not match or match.group(2) not in _UNITS or int(match.group(1)) < 1:
            raise ValueError(
                f"{option} {text!r}: write the budget as N/s, N/min or N/h, N at least 1 (e.g. "
                "500/min)"
            )
        return cls(int(match.group(1)), _UNITS[match.group(2)], text.strip())

    @property
    def step_s(self) -> float:
        """Seconds between two permits: the window (lengthened by ``GUARD``) over the limit."""
        return self.interval_ms / 1000.0 * (1.0 + GUARD) / self.limit

    @property
    def key(self) -> str:
        return f"{self.limit}_per_{self.interval_ms}ms"
