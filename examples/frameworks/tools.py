"""The support agent's two tools, shared by every framework's version of it.

The real ones would reach a database and a knowledge base; in the evals, tool mocks answer instead
(each call is also logged here, so a test can see that the real tool never ran).
"""

from __future__ import annotations

import os
from pathlib import Path


def _ran(line: str) -> None:
    log = os.environ.get("FRAMEWORKS_REAL_TOOL_LOG")
    if log:
        with Path(log).open("a") as f:
            f.write(line + "\n")


def lookup_order(order_id: str) -> str:
    """Look up an order's status by its id."""
    _ran(f"lookup_order {order_id}")
    return (
        f"order {order_id}: status unknown (the real database is not reachable from the examples)"
    )


def search_kb(query: str) -> str:
    """Search the support knowledge base."""
    _ran(f"search_kb {query}")
    return "no article found (the real knowledge base is not reachable from the examples)"
