"""The OpenTelemetry names the traces use, pinned in one place (SPEC §23).

The GenAI semantic conventions are still "Development" (semantic-conventions 1.37+, ``gen_ai.*``;
they moved repository in 2026): their names are written here once, not imported from
``opentelemetry-semantic-conventions``' ``_incubating`` modules, so that a release of those does not
rename what a run exports. OpenInference's names (Arize's conventions, which Phoenix shows) are read
too, where the agent's own instrumentation uses them.
"""

from __future__ import annotations

# -- GenAI operations (span names are "<operation> <target>") --------------------------------------
OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a model call."""

# -- GenAI attributes ------------------------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

# -- MCP (SPEC §28): a tool served over MCP ------------------------------------------------------
MCP_SERVER = "mcp.server"
"""The ``serverInfo.name`` of the MCP server that serves an ``execute_tool`` span's tool.

SPEC §28; the MCP semantic conventions ("Development") name no attribute for it.
"""
MCP_METHOD_NAME = "mcp.method.name"
"""The MCP method of the call (``tools/call``), the MCP semantic conventions' name."""
MCP_TOOLS_CALL = "tools/call"

# -- the evaluation event --------------------------------------------------------------------------
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

# -- this plugin's own attributes ------------------------------------------------------------------
COST = "agent_eval.cost"
"""A chat span's cost in USD (when the run's prices know the model)."""
TOOL_MOCKED = "agent_eval.tool.mocked"
CASE_ID = "agent_eval.case.id"
CASE_FILE = "agent_eval.case.file"
TRIAL = "agent_eval.trial"
RUN_ID = "agent_eval.run.id"
ORIGIN = "agent_eval.origin"
"""``"agent-eval"`` on the spans the plugin makes, not on the agent's own.

The plugin makes the root, chat and tool spans.
"""
SERVICE_NAME = "service.name"
SERVICE = "agent-eval"
VCS_REVISION = "vcs.ref.head.revision"
"""The git commit the run ran at (semantic conventions' ``vcs`` namespace)."""

# -- OpenInference ---------------------------------------------------------------------------------
OI_PROJECT_NAME = "openinference.project.name"
"""A resource attribute: the Phoenix project the run's spans go to.

``agent-eval``, on the run's own provider.
"""
OI_SPAN_KIND = "openinference.span.kind"
OI_TOOL_NAME = "tool.name"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OI_LLM_INPUT_MESSAGES = "llm.input_messages"
"""Prefix of ``llm.input_messages.<i>.message.role`` / ``.content``."""
OI_LLM_OUTPUT_MESSAGES = "llm.output_messages"
OI_LLM_KINDS = frozenset({"LLM"})
OI_TOOL_KINDS = frozenset({"TOOL"})
