"""The LLM for judges and simulated users: ``(messages, **options) -> str`` (SPEC §8).

The default, used when ``AGENT_EVAL_LLM_MODEL`` is set, talks to any OpenAI-compatible endpoint. A
user's ``agent_eval_llm`` may take the options (``temperature``, ``response_format``) or only the
messages: ``ask`` passes each option only to a callable that accepts it.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Callable
from typing import Any

LLM = Callable[..., str]
"""``(messages, **options) -> str``; options: ``temperature``, ``response_format``."""

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def accepted(llm: LLM, options: dict[str, Any]) -> dict[str, Any]:
    """The options ``llm``'s signature accepts.

    All of them for ``**options`` or an unreadable signature.
    """
    try:
        params = list(inspect.signature(llm).parameters.values())
    except (TypeError, ValueError):
        return options
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return options
    names = {p.name for p in params[1:] if p.kind in _NAMED}
    return {k: v for k, v in options.items() if k in names}


_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")


def prompt_json(value: Any) -> str:
    """``value`` as JSON for a prompt.

    A value JSON cannot hold is written as its ``str`` without a memory address: ``<Foo object at
    0x7f…>`` differs from run to run, and a prompt that does never matches its recording.
    """
    return json.dumps(value, default=lambda obj: _ADDRESS.sub("", str(obj)))


def ask(llm: LLM, messages: list[dict[str, str]], **options: Any) -> str:
    """``llm``'s reply to ``messages``, with the options it accepts.

    A reply that is not text is an error.
    """
    reply = llm(messages, **accepted(llm, options))
    if not isinstance(reply, str):
        raise TypeError(
            f"agent_eval_llm returned {type(reply).__name__}, expected the reply text (str)"
        )
    return reply


def default_llm() -> LLM | None:
    """An OpenAI-client LLM when ``AGENT_EVAL_LLM_MODEL`` is set, else ``None``."""
    model = os.environ.get("AGENT_EVAL_LLM_MODEL")
    if not model:
        return None
    try:
        import openai
    except ImportError as exc:
        raise RuntimeError(
            "AGENT_EVAL_LLM_MODEL is set but the `openai` package is missing: "
            "pip install 'pytest-agent-evalset[openai]'"
        ) from exc
    client = openai.OpenAI()  # reads OPENAI_API_KEY and OPENAI_BASE_URL
    json_mode = [True]  # cleared when the endpoint rejects response_format

    def call(messages: list[dict[str, str]], **options: Any) -> str:
        """One chat completion.

        Temperature 0 unless given; ``response_format`` dropped where unsupported; ``model`` (a
        judge panel member's own) instead of ``AGENT_EVAL_LLM_MODEL``.
        """
        sent: Any = (
            messages  # the client's own message types: plain dicts are what it takes at run time
        )
        options = {"temperature": 0, "model": model, **options}
        if not json_mode[0]:
            options.pop("response_format", None)
        try:
            reply = client.chat.completions.create(messages=sent, **options)
        except openai.BadRequestError:
            if "response_format" not in options:
                raise
            options.pop(
                "response_format"
            )  # e.g. a local server without JSON mode: the judge reads the reply anyway
            reply = client.chat.completions.create(messages=sent, **options)
            json_mode[0] = False  # it was the response_format: not sent again
        return reply.choices[0].message.content or ""

    return call
