"""The running trial's context: which case and trial is running, and the conversation it continues.

Set by the runner for each trial; read by adapters (an HTTP agent's session id, a framework's own
message list) and by the traffic hook (which case a request belongs to). Context variables, so
concurrent trials each see their own.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

TRIAL: ContextVar[tuple[str, int] | None] = ContextVar("agent_eval_trial_id", default=None)
"""The running case's id and trial number, set by the runner for each trial.

For adapters that keep state per case and trial (an HTTP agent's session id).
"""

CONVERSATION: ContextVar[Any] = ContextVar("agent_eval_conversation", default=None)
"""The conversation an agent call continues, in the agent's own form.

During an agent call of a conversation: the ``RunRecord.conversation`` that ``normalise`` read from
the previous call's result (a framework's own message list), to be continued; ``None`` for the first
message and single calls.
"""
