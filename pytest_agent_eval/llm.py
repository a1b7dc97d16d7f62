"""The default LLM for judges and simulated users: any OpenAI-compatible endpoint (SPEC §8)."""

from __future__ import annotations

import os
from collections.abc import Callable

LLM = Callable[[list[dict[str, str]]], str]


def default_llm() -> LLM | None:
    """An OpenAI-client LLM when ``AGENT_EVAL_LLM_MODEL`` is set, else ``None``."""
    model = os.environ.get("AGENT_EVAL_LLM_MODEL")
    if not model:
        return None
    try:
        import openai
    except ImportError as exc:
        raise RuntimeError(
            "AGENT_EVAL_LLM_MODEL is set but the `openai` package is missing: pip install 'pytest-agent-eval[openai]'"
        ) from exc
    client = openai.OpenAI()  # reads OPENAI_API_KEY and OPENAI_BASE_URL

    def call(messages: list[dict[str, str]]) -> str:
        reply = client.chat.completions.create(model=model, messages=messages, temperature=0)  # type: ignore[arg-type]
        return reply.choices[0].message.content or ""

    return call
