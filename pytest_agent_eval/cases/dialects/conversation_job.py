"""Conversation-evaluation job YAML (SPEC §12): recognised by its shape, not runnable yet.

A job (``evaluator``, ``target``, ``aspirationalAverage``, ``tasks``, ``facts``, ``assertions``, ``seeds``,
``greetings``) is driven by a simulated user; until that lands, such a file gets one clear error instead of
being mistaken for another format.
"""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.document import Document
from pytest_agent_eval.cases.errors import EvalFileError
from pytest_agent_eval.cases.model import EvalFile
from pytest_agent_eval.checks import CheckRegistry

NAME = "conversation_job"
JOB_KEYS = frozenset(
    {"evaluator", "target", "aspirationalAverage", "tasks", "facts", "assertions", "seeds", "greetings"}
)


def detect(data: Any) -> tuple[bool, str]:
    """A mapping with ``evaluator`` or ``aspirationalAverage``, and ``tasks``."""
    need = "a mapping with `evaluator:` (or `aspirationalAverage:`) and `tasks:`"
    if isinstance(data, dict) and "tasks" in data and {"evaluator", "aspirationalAverage"} & data.keys():
        return True, ""
    return False, need


def load(doc: Document, registry: CheckRegistry) -> EvalFile:
    """Always an error: the format is known but needs the simulated user, which is not built yet."""
    key = ("evaluator",) if "evaluator" in doc.data else ("tasks",)
    raise EvalFileError(
        doc.path,
        doc.line(key),
        "this is a conversation-evaluation job (evaluator/tasks/facts/assertions); pytest-agent-eval recognises "
        "the format but cannot run it yet (it needs the simulated user, SPEC §9). Keep the file out of "
        "collection (rename it so it does not match `agent_eval_files`) until then",
    )
