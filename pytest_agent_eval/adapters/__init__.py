"""Framework adapters, one module per framework behind the :class:`Adapter` protocol (``base``).

The built-in ones: ``plain`` callables, ``langchain`` (LangChain / LangGraph) and ``http`` (agents
served over HTTP). Plugins add theirs through ``pytest_agent_eval_register_adapters``; see ``base``
for how to write one.
"""

from pytest_agent_eval.adapters.base import (
    Adapter,
    Agent,
    ArgsOf,
    StandIn,
    UnreadableResult,
    calling,
)
from pytest_agent_eval.adapters.registry import AdapterRegistry, builtin_adapters, is_builtin

__all__ = [
    "Adapter",
    "AdapterRegistry",
    "Agent",
    "ArgsOf",
    "StandIn",
    "UnreadableResult",
    "builtin_adapters",
    "calling",
    "is_builtin",
]
