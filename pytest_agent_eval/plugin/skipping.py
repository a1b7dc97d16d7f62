"""How the plugin ends an eval item other than by passing.

A skip reported at the case's own line (a case with nothing scored), through public report
attributes; a failure with its message alone.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

from pytest_agent_eval.secrets import scrub_text
from pytest_agent_eval.text import printable

_AT_ITEM = pytest.StashKey[bool]()


def skip_at_item(item: pytest.Item, reason: str) -> NoReturn:
    """Skip ``item`` with ``reason``.

    Reported at the item's own location (its case's line) instead of here.
    """
    item.stash[_AT_ITEM] = True
    pytest.skip(reason)


def place(item: pytest.Item, report: pytest.TestReport) -> None:
    """Point a skip raised by ``skip_at_item`` at the item's location.

    As ``-rs`` and IDEs show it.
    """
    if report.skipped and report.when == "call" and item.stash.get(_AT_ITEM, False):
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            path, line, _ = item.reportinfo()
            report.longrepr = (os.fspath(path), (line or 0) + 1, longrepr[2])


def fail_item(item: pytest.Item, message: str) -> NoReturn:
    """Fail ``item`` with ``message`` alone.

    No traceback into the plugin (nor the error being handled, if any), files named relative to the
    rootdir as pytest does, and no control character from the agent or the file reaching the
    terminal raw.
    """
    raise pytest.fail.Exception(
        printable(scrub_text(relative(message, item.config))), pytrace=False
    ) from None


def relative(message: str, config: pytest.Config) -> str:
    """Messages name files relative to the rootdir, as pytest does."""
    return message.replace(f"{config.rootpath}/", "")
