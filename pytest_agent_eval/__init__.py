"""pytest-agent-eval: golden-set files of LLM-agent eval cases as pytest items that run the real agent.

PYTEST_DONT_REWRITE: the plugin has no test asserts to rewrite (and pytester sessions would warn otherwise).
"""

from __future__ import annotations

from pytest_agent_eval.cases.model import Case, Turn
from pytest_agent_eval.checks import Check, CheckContext, CheckError, CheckRegistry, CheckResult
from pytest_agent_eval.record import AgentResult, RunRecord, ToolCall

__version__ = "0.1.0"

__all__ = [
    "AgentResult",
    "Case",
    "Check",
    "CheckContext",
    "CheckError",
    "CheckRegistry",
    "CheckResult",
    "RunRecord",
    "ToolCall",
    "Turn",
    "__version__",
]
