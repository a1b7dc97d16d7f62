"""pytest-agent-eval: golden-set files of LLM-agent eval cases as pytest items.

Each item runs the real agent.

The public API is ``__all__``: what the documentation tells users to import, for agents
(``AgentResult``, ``ToolCall``), checks (``Check``, ``CheckContext``, ``CheckError``,
``CheckRegistry``, ``CheckResult``, ``RunRecord``), file formats (``Dialect``, ``DialectRegistry``,
``LoadedFile``), framework adapters (``Adapter``, ``AdapterRegistry``), tool mocks (``ToolMocks``,
``wrap``) and results (``Case``, ``CaseResult``). Nothing else is re-exported. Every name loads with
its module when first used, so importing the package (as pytest does for every run, eval files or
not) loads no engine. PYTEST_DONT_REWRITE: the plugin has no test asserts to rewrite (and pytester
sessions would warn that it cannot rewrite an already imported plugin); its other modules are taken
off pytest's rewrite list as this one loads (``compat.leave_assertion_rewriting``).
"""

import typing

from pytest_agent_eval import compat as _compat

if typing.TYPE_CHECKING:
    from pytest_agent_eval.adapters import Adapter, AdapterRegistry
    from pytest_agent_eval.cases.dialects import Dialect, DialectRegistry
    from pytest_agent_eval.checks import Check, CheckContext, CheckError, CheckRegistry
    from pytest_agent_eval.core.case import Case, LoadedFile
    from pytest_agent_eval.core.results import (
        AgentResult,
        CaseResult,
        CheckResult,
        RunRecord,
        ToolCall,
    )
    from pytest_agent_eval.mocks import ToolMocks, wrap

from pytest_agent_eval.version import __version__

_compat.leave_assertion_rewriting(__name__)

_LAZY = {
    "AgentResult": "pytest_agent_eval.core.results",
    "RunRecord": "pytest_agent_eval.core.results",
    "ToolCall": "pytest_agent_eval.core.results",
    "Case": "pytest_agent_eval.core.case",
    "LoadedFile": "pytest_agent_eval.core.case",
    "Check": "pytest_agent_eval.checks",
    "CheckContext": "pytest_agent_eval.checks",
    "CheckError": "pytest_agent_eval.checks",
    "CheckRegistry": "pytest_agent_eval.checks",
    "CheckResult": "pytest_agent_eval.checks",
    "Adapter": "pytest_agent_eval.adapters",
    "AdapterRegistry": "pytest_agent_eval.adapters",
    "CaseResult": "pytest_agent_eval.core.results",
    "ToolMocks": "pytest_agent_eval.mocks",
    "wrap": "pytest_agent_eval.mocks",
    "Dialect": "pytest_agent_eval.cases.dialects",
    "DialectRegistry": "pytest_agent_eval.cases.dialects",
}

__all__ = [
    "Adapter",
    "AdapterRegistry",
    "AgentResult",
    "Case",
    "CaseResult",
    "Check",
    "CheckContext",
    "CheckError",
    "CheckRegistry",
    "CheckResult",
    "Dialect",
    "DialectRegistry",
    "LoadedFile",
    "RunRecord",
    "ToolCall",
    "ToolMocks",
    "__version__",
    "wrap",
]


def __getattr__(name: str) -> typing.Any:
    """The names that load with their module on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
