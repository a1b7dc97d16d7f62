"""File formats (dialects): the native one and those of existing eval setups, one module each.

Each module has its ``DIALECT``: the native format (SPEC §3) and the formats of existing eval setups
(SPEC §12), each detected from a file's shape. ``Dialect`` is the contract a plugin's own format
fulfils (see docs/extending.md).
"""

from pytest_agent_eval.cases.dialects.base import Detect, Dialect, DialectRegistry, Load

__all__ = ["Detect", "Dialect", "DialectRegistry", "Load"]
