"""``stop_on_failure``: skip a file's remaining cases once one of them fails.

For files that set it.

Per pytest process: under ``-n`` each worker stops the cases it runs itself.
"""

from __future__ import annotations

import pytest

STOPS = pytest.StashKey[bool]()
"""Set on the items of a file that sets ``stop_on_failure``."""
_SKIPPING = pytest.StashKey[bool]()
"""Set on a case that a failure earlier in its file skips."""


def note_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """After the first failed case of such a file, mark its later cases to be skipped.

    The skip names the failure.
    """
    if not (report.failed and item.stash.get(STOPS, False)) or item.stash.get(_SKIPPING, False):
        return
    items = item.session.items
    later = items[items.index(item) + 1 :] if item in items else []
    reason = f"stop_on_failure: {item.nodeid} failed earlier in this file"
    for other in later:
        if (
            other.path == item.path
            and other.stash.get(STOPS, False)
            and not other.stash.get(_SKIPPING, False)
        ):
            other.stash[_SKIPPING] = True
            other.add_marker(pytest.mark.skip(reason=reason))
