"""Resolving an agent through the adapters, and calling it.

The agent is a ``module:attr``, or what the ``agent`` fixture returned. Sync agents are called in a
worker thread, async ones on the running loop.
"""

from __future__ import annotations

import inspect
import json
import os
import traceback
from typing import Any

from pytest_agent_eval.adapters import AdapterRegistry, Agent, builtin_adapters
from pytest_agent_eval.faults import describe, escape, interrupt
from pytest_agent_eval.imports import ImportRefError, import_object
from pytest_agent_eval.run.blocking import in_thread, outside_loop
from pytest_agent_eval.run.eager import needs_loop
from pytest_agent_eval.run.stalls import timed_steps


def as_agent(obj: Any, name: str | None = None, adapters: AdapterRegistry | None = None) -> Agent:
    """The :class:`Agent` for ``obj`` from the first adapter that recognises it.

    The adapters are ``adapters``, else the built-in ones. Raise ``TypeError`` saying what an agent
    is when none does.
    """
    return (adapters or builtin_adapters()).as_agent(obj, name)


def resolve(
    ref: str | dict[str, Any], instances: dict[str, Any], adapters: AdapterRegistry | None = None
) -> Agent:
    """Import ``module:attr``, the agent a reference names.

    A class is instantiated once (cached in ``instances``) and its instance used. A reference that
    an adapter recognises as it is (a URL, a mapping) is that adapter's agent, and nothing is
    imported.
    """
    if not isinstance(
        ref, str
    ):  # an HTTP agent's {url, ...}: the adapters read it, once per session
        key = f"agent {json.dumps(ref, sort_keys=True, default=str)}"
        if key not in instances:
            instances[key] = (adapters or builtin_adapters()).as_agent(ref, str(ref.get("url")))
        return instances[key]  # type: ignore[no-any-return]
    cached = instances.get(f"agent {ref}")
    if (
        cached is not None
    ):  # resolved once per session: importing and inspecting per case costs ~0.1 ms
        return cached  # type: ignore[no-any-return]
    registry = adapters or builtin_adapters()
    if (
        registry.adapter_for(ref) is not None
    ):  # a reference an adapter reads itself (e.g. a URL), not imported
        agent = instances[f"agent {ref}"] = registry.as_agent(ref, ref)
        return agent
    obj = import_object(ref)
    if inspect.isclass(obj):
        if ref not in instances:
            instances[ref] = _create(obj)
        obj = instances[ref]
    agent = instances[f"agent {ref}"] = registry.as_agent(obj, ref)
    return agent


class AgentCreationError(ImportRefError):
    """An agent class (``module:Class``) whose constructor raised."""


def _create(cls: type) -> Any:
    """An instance of the agent class; what its constructor raises becomes one line naming where."""
    try:
        return cls()
    except BaseException as exc:
        interrupt(exc)
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise AgentCreationError(
            f"could not be created: {describe(exc)} "
            f"({os.path.relpath(where.filename)}:{where.lineno})"
        ) from None


async def invoke(agent: Agent, query: str, context: dict[str, Any], *, inline: bool = False) -> Any:
    """Call the agent and await what it returns.

    Async agents run on the running loop, sync ones in a worker thread (in this one when
    ``inline``); what they return is awaited. What the agent raises comes out as an ``Exception``
    (see ``faults``).
    """
    try:
        if agent.is_async:
            result = agent.call(query, context)
        elif inline:
            result = outside_loop(agent.call, query, context)
        else:
            result = await in_thread(agent.call, query, context)
        if inspect.isawaitable(result):
            await needs_loop()  # a sync agent's awaitable: it runs on the loop
            result = await timed_steps(
                result
            )  # fails when a step blocks the loop past the case's timeout
    except BaseException as exc:
        interrupt(exc)  # KeyboardInterrupt: the run stops, as on Ctrl-C
        carried = escape(exc)
        if carried is exc:
            raise
        raise carried from None
    return result
