"""The Neo4j connection for Cypher assertions and setups.

It is the ``agent_eval_neo4j`` fixture's driver, else the official ``neo4j`` driver (optional extra
``neo4j``) connected from the environment, created when first used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENV_URI = ("NEO4J_URI", "NEO_URI")
ENV_USER = ("NEO4J_USERNAME", "NEO_USERNAME")
ENV_PASSWORD = ("NEO4J_PASSWORD", "NEO_PASSWORD")
HOW = (
    "set NEO4J_URI (or NEO_URI), NEO4J_USERNAME, NEO4J_PASSWORD and install the `neo4j` extra "
    "(pip install 'pytest-agent-evalset[neo4j]'), "
    "or define an `agent_eval_neo4j` fixture that returns a driver"
)


class NotConfigured(Exception):
    """No Neo4j connection is configured: Cypher cannot be run (the assertion is not scored)."""


def _env(names: tuple[str, ...], default: str | None = None) -> str | None:
    return next((os.environ[n] for n in names if os.environ.get(n)), default)


def env_driver() -> Any:
    """The official driver, connected as the environment says.

    Raise :class:`NotConfigured` without a URI or the package.
    """
    uri = _env(ENV_URI)
    if not uri:
        raise NotConfigured(f"no Neo4j configured: {HOW}")
    try:
        import neo4j  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise NotConfigured(
            f"{ENV_URI[0]} is set but the `neo4j` package is missing: {HOW}"
        ) from None
    return neo4j.GraphDatabase.driver(
        uri, auth=(_env(ENV_USER) or "neo4j", _env(ENV_PASSWORD) or "")
    )


class Connection:
    """One conversation's connection: the given driver, else one from the environment.

    The environment's driver is made on first use.
    """

    def __init__(self, driver: Any = None, factory: Callable[[], Any] = env_driver) -> None:
        self._driver = driver
        self._factory = factory
        self._own = False

    def driver(self) -> Any:
        if self._driver is None:
            self._driver = self._factory()
            self._own = True
        return self._driver

    def run(self, query: str) -> list[Any]:
        """The records of ``query``."""
        with self.driver().session() as session:
            return list(session.run(query))

    def single_value(self, query: str) -> Any:
        """The first value of the first record (``None`` when there is none)."""
        records = self.run(query)
        if not records:
            return None
        record = records[0]
        values = record.values() if hasattr(record, "values") else record
        return values[0] if len(values) else None

    def close(self) -> None:
        if self._own and self._driver is not None:
            self._driver.close()
