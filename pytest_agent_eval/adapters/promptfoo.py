"""promptfoo providers as agents (SPEC §19): ``{promptfoo_provider: {...}}``.

They are made by the promptfoo dialect.

* a Python provider (``file://x.py`` / ``python:x.py[:fn]``): ``call_api(prompt, options, context)``
  (sync or async) returning ``{"output": ..., "error", "tokenUsage", "cost", "metadata"}``, called
  as promptfoo calls it (``options = {"id", "config"}``, ``context = {"vars", "prompt"}``);
* ``openai:[chat:]<model>`` / ``anthropic:[messages:]<model>``: the rendered prompt (a chat JSON
  list of ``{role, content}``, else one user message) sent through the official client, so the
  traffic hook, cassettes and budgets see it; the base URL from the provider's
  ``config.apiBaseUrl``, else ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``; the key from
  ``config.apiKey``, ``config.apiKeyEnvar``, else the usual variable.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agent_eval.adapters.base import Agent, StandIn, calling
from pytest_agent_eval.adapters.plain import normalise as plain_normalise
from pytest_agent_eval.adapters.recognise import PROVIDER_KEY, promptfoo_provider
from pytest_agent_eval.core.results import RunRecord, ToolCall
from pytest_agent_eval.faults import describe
from pytest_agent_eval.imports import file_module

_LOCK = threading.Lock()


class ProviderError(RuntimeError):
    """A provider answered with ``error`` (promptfoo's failed call)."""


def _module(path: str) -> Any:
    with _LOCK:
        try:
            return file_module(Path(path), "_promptfoo_provider_")
        except FileNotFoundError:
            raise TypeError(f"cannot load the Python provider {path}") from None
        except Exception as exc:  # the provider's own error, as one line naming the file
            raise TypeError(
                f"the Python provider {path} could not be loaded: {describe(exc)}"
            ) from None


def _python(provider: dict[str, Any]) -> Callable[[str, dict[str, Any]], Any]:
    func = getattr(_module(provider["path"]), provider["function"], None)
    if not callable(func):
        raise TypeError(
            f"{provider['path']} has no function {provider['function']}(prompt, options, context)"
        )
    options = {"id": provider["id"], "config": provider.get("config") or {}}

    if _is_async(func):

        async def call_async(prompt: str, context: dict[str, Any]) -> Any:
            return await func(prompt, options, _context(context))

        return call_async

    def call(prompt: str, context: dict[str, Any]) -> Any:
        return func(prompt, options, _context(context))

    return call


def _is_async(func: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(func)


def _context(context: dict[str, Any]) -> dict[str, Any]:
    return {"vars": context.get("vars", {}), "prompt": context.get("prompt", {})}


def messages_of(prompt: str) -> list[dict[str, Any]]:
    """A chat prompt (JSON list of ``{role, content}``) as messages.

    Any other text is one user message.
    """
    text = prompt.strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, list) and all(isinstance(m, dict) and "role" in m for m in data):
            return data
    return [{"role": "user", "content": prompt}]


def _key(config: dict[str, Any], default_env: str) -> str:
    if config.get("apiKey"):
        return str(config["apiKey"])
    return os.environ.get(str(config.get("apiKeyEnvar") or default_env), "") or "unused"


def _client(
    provider: dict[str, Any], package: str, env: str
) -> tuple[Callable[[], Any], dict[str, Any]]:
    """The official client of ``package`` (``openai``/``anthropic``), and the provider's options.

    The client is made at the first call (so a missing package fails the case, not the collection);
    the options are for its requests.
    """
    config = dict(provider.get("config") or {})
    state: dict[str, Any] = {}

    def client() -> Any:
        if "client" not in state:
            try:
                module = importlib.import_module(package)
            except ImportError:
                raise TypeError(
                    f"the {package}: provider needs the official client: pip install {package}"
                ) from None
            base_url = config.get("apiBaseUrl") or os.environ.get(f"{env}_BASE_URL") or None
            make = module.OpenAI if package == "openai" else module.Anthropic
            state["client"] = make(api_key=_key(config, f"{env}_API_KEY"), base_url=base_url)
        return state["client"]

    return client, {
        k: v for k, v in config.items() if k not in ("apiBaseUrl", "apiKey", "apiKeyEnvar")
    }


def _openai(provider: dict[str, Any]) -> Callable[[str, dict[str, Any]], Any]:
    client, options = _client(provider, "openai", "OPENAI")

    def call(prompt: str, context: dict[str, Any]) -> Any:
        messages: Any = messages_of(prompt)
        return client().chat.completions.create(
            model=provider["model"], messages=messages, **options
        )

    return call


def _anthropic(provider: dict[str, Any]) -> Callable[[str, dict[str, Any]], Any]:
    client, config = _client(provider, "anthropic", "ANTHROPIC")

    def call(prompt: str, context: dict[str, Any]) -> Any:
        options = {"max_tokens": 1024, **config}
        messages = messages_of(prompt)
        system = "\n".join(str(m["content"]) for m in messages if m["role"] == "system")
        if system:
            options["system"] = system
        chat: Any = [m for m in messages if m["role"] != "system"]
        return client().messages.create(model=provider["model"], messages=chat, **options)

    return call


class PromptfooAdapter:
    """Calls a promptfoo provider and reads its answer into the run record."""

    name = "promptfoo"

    def recognises(self, obj: Any) -> bool:
        return promptfoo_provider(obj)

    def agent(self, obj: Any, name: str) -> Agent:
        provider = obj[PROVIDER_KEY]
        kind = provider["kind"]
        make = {"python": _python, "openai": _openai, "anthropic": _anthropic}[kind]
        return calling(make(provider), str(provider.get("label") or provider["id"]), self, obj)

    def normalise(self, result: Any) -> RunRecord:
        if isinstance(result, dict) and ("output" in result or "error" in result):
            return _response(result)
        kind = type(result).__module__
        if kind.startswith("openai."):
            return _chat_completion(result)
        if kind.startswith("anthropic."):
            return _anthropic_message(result)
        return plain_normalise(result)

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        return None

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        return None


def _response(result: dict[str, Any]) -> RunRecord:
    """A Python provider's ``ProviderResponse`` read: output, usage, cost.

    The output is text, or an object shown as JSON.
    """
    if result.get("error") and result.get("output") in (None, ""):
        raise ProviderError(f"the provider answered with an error: {result['error']}")
    output = result.get("output")
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    usage: dict[str, Any] = {}
    tokens = result.get("tokenUsage") or {}
    if isinstance(tokens, dict):
        if "prompt" in tokens:
            usage["input_tokens"] = tokens["prompt"]
        if "completion" in tokens:
            usage["output_tokens"] = tokens["completion"]
        if "total" in tokens:
            usage["total_tokens"] = tokens["total"]
    if isinstance(result.get("cost"), (int, float)):
        usage["cost"] = float(result["cost"])
    metadata = result.get("metadata") if isinstance(result.get("metadata"), dict) else {}
    return RunRecord(
        output=text, tool_calls=tool_calls_of(output), metadata=dict(metadata or {}), usage=usage
    )


def tool_calls_of(output: Any) -> list[ToolCall]:
    """Tool calls an output object holds.

    Read from OpenAI ``tool_calls`` / ``function``, Anthropic ``tool_use``, or ``{name}``.
    """
    if isinstance(output, dict):
        if isinstance(output.get("tool_calls"), list):
            return tool_calls_of(output["tool_calls"])
        output = [output]
    if not isinstance(output, list):
        return []
    calls = []
    for item in output:
        if not isinstance(item, dict):
            continue
        function: dict[str, Any] = (
            item["function"] if isinstance(item.get("function"), dict) else item
        )
        name = function.get("name")
        if not isinstance(name, str) or (
            item.get("type") not in (None, "function", "tool_use", "function_call")
        ):
            continue
        args: Any = function.get("arguments", function.get("input", function.get("args", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {"arguments": args}
        calls.append(ToolCall(name, args if isinstance(args, dict) else {"arguments": args}))
    return calls


def _chat_completion(result: Any) -> RunRecord:
    message = result.choices[0].message
    calls = [
        {
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments},
        }
        for c in message.tool_calls or []
    ]
    text = message.content if message.content is not None else json.dumps(calls)
    usage = {}
    if getattr(result, "usage", None) is not None:
        usage = {
            "input_tokens": result.usage.prompt_tokens,
            "output_tokens": result.usage.completion_tokens,
        }
    return RunRecord(output=text or "", tool_calls=tool_calls_of(calls), usage=usage)


def _anthropic_message(result: Any) -> RunRecord:
    blocks = [b.model_dump() if hasattr(b, "model_dump") else dict(b) for b in result.content]
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    usage = {"input_tokens": result.usage.input_tokens, "output_tokens": result.usage.output_tokens}
    return RunRecord(
        output=text or (json.dumps(uses) if uses else ""),
        tool_calls=tool_calls_of(uses),
        usage=usage,
    )


ADAPTER = PromptfooAdapter()
