"""How each built-in adapter tells its framework's agents, without loading the adapter or framework.

The registry asks these first, and loads an adapter's module only for an object that is its
framework's (SPEC §27): a run of plain functions loads the ``plain`` adapter alone.
"""

from __future__ import annotations

import sys
from typing import Any

PROVIDER_KEY = "promptfoo_provider"
"""The key of a promptfoo provider's reference (``{promptfoo_provider: {...}}``).

The promptfoo dialect writes it into a case's agent; ``adapters/promptfoo.py`` calls it.
"""


def of_class(obj: Any, package: str, class_name: str) -> bool:
    """Whether ``obj`` is an instance of ``class_name`` of ``package`` (or of a subclass).

    Told by the names in its type's MRO, so the package is never imported to say no.
    """
    prefix = f"{package}."
    return any(
        c.__name__ == class_name and c.__module__.startswith(prefix) for c in type(obj).__mro__
    )


def openai_agent(obj: Any) -> bool:
    """An ``agents.Agent`` of the OpenAI Agents SDK (or a subclass)."""
    return of_class(obj, "agents", "Agent")


def pydantic_ai_agent(obj: Any) -> bool:
    """A ``pydantic_ai.Agent``."""
    return of_class(obj, "pydantic_ai", "Agent")


def runnable(obj: Any) -> bool:
    """LangChain / LangGraph runnables take ``{"messages": [...]}`` state, not (query, context)."""
    return hasattr(obj, "ainvoke") and hasattr(obj, "with_config")


def promptfoo_provider(obj: Any) -> bool:
    """A promptfoo provider's reference, as the promptfoo dialect writes it."""
    return isinstance(obj, dict) and isinstance(obj.get(PROVIDER_KEY), dict)


def http_reference(obj: Any) -> bool:
    """An HTTP agent's reference (a URL, or a mapping with a ``url``) or an ``HttpAgent``."""
    if isinstance(obj, str):
        return obj.startswith(("http://", "https://"))
    if isinstance(obj, dict):
        return isinstance(obj.get("url"), str)
    http = sys.modules.get("pytest_agent_eval.adapters.http")  # none made before it loads
    return http is not None and isinstance(obj, http.HttpAgent)
