"""The adapters of a session, tried in order.

Those that plugins register come first, then the built-in ones, ``plain`` (any callable) last.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.adapters import recognise
from pytest_agent_eval.adapters.base import Adapter, Agent, StandIn
from pytest_agent_eval.adapters.plain import ADAPTER as PLAIN

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import RunRecord


class AdapterRegistry:
    """Adapters in the order they are tried.

    Plugins add theirs through ``pytest_agent_eval_register_adapters``; an adapter registered later
    is tried after earlier registered ones, all before the built-in ones.
    """

    def __init__(self, builtin: list[Adapter]) -> None:
        self._added: list[Adapter] = []
        self._builtin = list(builtin)

    def register(self, adapter: Adapter) -> None:
        """Try ``adapter`` before the built-in adapters (and after those registered before it)."""
        if not isinstance(adapter, Adapter):
            missing = [m for m in ("name", *_METHODS) if not hasattr(adapter, m)]
            raise TypeError(
                f"{adapter!r} is not an adapter: it lacks {', '.join(missing)} "
                "(see docs/extending.md)"
            )
        self._added.append(adapter)

    def __iter__(self) -> Iterator[Adapter]:
        return iter([*self._added, *self._builtin])

    def names(self) -> list[str]:
        return [adapter.name for adapter in self]

    def adapter_for(self, obj: Any) -> Adapter | None:
        """The first adapter that recognises ``obj``, if any."""
        return next((adapter for adapter in self if adapter.recognises(obj)), None)

    def as_agent(self, obj: Any, name: str | None = None) -> Agent:
        """The :class:`Agent` of the first adapter that recognises ``obj``.

        ``TypeError`` when none does.
        """
        if isinstance(obj, Agent):
            return obj
        name = name or getattr(obj, "__qualname__", None) or type(obj).__name__
        adapter = self.adapter_for(obj)
        if adapter is not None:
            return adapter.agent(obj, name)
        shown = repr(obj)
        raise TypeError(
            f"got {type(obj).__name__} {shown[:60] + '…' if len(shown) > 60 else shown}, "
            "not an agent: expected a "
            "callable (query, context) -> result, or an object with run/invoke/ainvoke"
        )

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        """The stand-in of the first adapter that wraps ``tool``; ``TypeError`` when none does."""
        for adapter in self:
            wrapped = adapter.wrap_tool(tool, standin)
            if wrapped is not None:
                return wrapped
        raise TypeError(
            f"cannot wrap {tool!r}: expected a function or a tool object of a framework "
            f"({', '.join(self.names())}); "
            "for a dispatcher (name, args) use tool_mocks.patch('module:function')"
        )


_METHODS = ("recognises", "agent", "normalise", "wrap_tool", "mock_tools")


class _Deferred:
    """A built-in framework adapter whose module loads when an object is first its framework's.

    Until then it answers ``recognises`` from :mod:`recognise` alone (SPEC §27): a run of plain
    functions loads none of the framework adapters. Its other methods are the adapter's own.
    """

    def __init__(self, name: str, module: str, recognises: Callable[[Any], bool]) -> None:
        self.name = name
        self._module = module
        self.recognises = recognises

    @functools.cached_property
    def adapter(self) -> Adapter:
        """The adapter itself (its module's ``ADAPTER``), loaded on first use."""
        found: Adapter = importlib.import_module(self._module).ADAPTER
        return found

    def agent(self, obj: Any, name: str) -> Agent:
        return self.adapter.agent(obj, name)

    def normalise(self, result: Any) -> RunRecord:
        return self.adapter.normalise(result)

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        return self.adapter.wrap_tool(tool, standin)

    def mock_tools(self, agent: Any, wrap: Callable[[Any], Any]) -> Any:
        return self.adapter.mock_tools(agent, wrap)


_PACKAGE = "pytest_agent_eval.adapters"
BUILTIN: tuple[Adapter, ...] = (
    _Deferred("openai_agents", f"{_PACKAGE}.openai_agents", recognise.openai_agent),
    _Deferred("pydantic_ai", f"{_PACKAGE}.pydantic_ai", recognise.pydantic_ai_agent),
    _Deferred("langchain", f"{_PACKAGE}.langchain", recognise.runnable),
    _Deferred("promptfoo", f"{_PACKAGE}.promptfoo", recognise.promptfoo_provider),
    _Deferred("http", f"{_PACKAGE}.http", recognise.http_reference),
    PLAIN,
)
"""The built-in adapters in the order they are tried, plain last."""
_MODULES = frozenset({PLAIN.__module__, *(a._module for a in BUILTIN if isinstance(a, _Deferred))})


def builtin_adapters() -> AdapterRegistry:
    """A registry of the built-in adapters only (each one module of this package), plain last."""
    return AdapterRegistry(list(BUILTIN))


def is_builtin(adapter: Adapter) -> bool:
    """Whether ``adapter`` is one of this package's (an agent's ``adapter`` is the module's own).

    Those have a pure ``normalise``: it needs no event loop.
    """
    return type(adapter).__module__ in _MODULES or isinstance(adapter, _Deferred)
