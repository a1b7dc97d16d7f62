"""Skips reported at the case's own line (a case with nothing scored), through public report attributes."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

_AT_ITEM = pytest.StashKey[bool]()


def skip_at_item(item: pytest.Item, reason: str) -> NoReturn:
    """Skip ``item`` with ``reason``, reported at the item's own location (its case's line) instead of here."""
    item.stash[_AT_ITEM] = True
    pytest.skip(reason)


def place(item: pytest.Item, report: pytest.TestReport) -> None:
    """Point a skip raised by ``skip_at_item`` at the item's location, as ``-rs`` and IDEs show it."""
    if report.skipped and report.when == "call" and item.stash.get(_AT_ITEM, False):
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            path, line, _ = item.reportinfo()
            report.longrepr = (os.fspath(path), (line or 0) + 1, longrepr[2])
