"""Tool mocks (SPEC §6): canned tool responses per case and a record of every tool call.

No pytest here.

One module per concern:

* ``responses``: the response forms (a literal, ``{return: x}``, ``{sequence: [...]}``, ``{raise:
  "Type: msg"}``, ``{when: [{args, return}], default: r}``, ``{call: "module:function"}``), compiled
  and checked once.
* ``recording``: a case's plan and a trial's recording, which answers each call; a call with no
  response follows ``unmocked_tools`` (``strict``: raise and fail the trial; ``default``;
  ``passthrough``). Before the agent runs, every mocked tool must have a stand-in, else its real
  tool would run; after a trial, a mock the case itself declared and nobody called fails the trial.
* ``current``: which trial's recording a call belongs to (a context variable, so concurrent trials
  and cases each record only their own calls).
* ``standins``: functions and tool objects that take a tool's place (:func:`wrap`; framework tool
  objects through the adapters) or a dispatcher's ``(name, args) -> result``.
* ``patching``: installing stand-ins at ``module:attr``.
* ``fixture``: :class:`ToolMocks`, what the ``tool_mocks`` fixture gives.

Process-wide state, each documented where it lives: the current recording (``current``), the live
stand-ins (``standins``) and the patched module attributes (``patching``).
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from pytest_agent_eval.core.tool_errors import (
        MockConfigError,
        ToolMockError,
        UnmockedToolError,
    )
    from pytest_agent_eval.mocks.fixture import ToolMocks
    from pytest_agent_eval.mocks.recording import MockPlan, Recording
    from pytest_agent_eval.mocks.responses import (
        Response,
        Value,
        compile_response,
        load_responses,
    )
    from pytest_agent_eval.mocks.standins import standin, wrap

_LAZY = {
    "MockConfigError": "pytest_agent_eval.core.tool_errors",
    "ToolMockError": "pytest_agent_eval.core.tool_errors",
    "UnmockedToolError": "pytest_agent_eval.core.tool_errors",
    "ToolMocks": "pytest_agent_eval.mocks.fixture",
    "MockPlan": "pytest_agent_eval.mocks.recording",
    "Recording": "pytest_agent_eval.mocks.recording",
    "Response": "pytest_agent_eval.mocks.responses",
    "Value": "pytest_agent_eval.mocks.responses",
    "compile_response": "pytest_agent_eval.mocks.responses",
    "load_responses": "pytest_agent_eval.mocks.responses",
    "standin": "pytest_agent_eval.mocks.standins",
    "wrap": "pytest_agent_eval.mocks.standins",
}
"""Each name's module: a module of the package loads only what it needs (SPEC §27)."""

__all__ = [
    "MockConfigError",
    "MockPlan",
    "Recording",
    "Response",
    "ToolMockError",
    "ToolMocks",
    "UnmockedToolError",
    "Value",
    "compile_response",
    "load_responses",
    "standin",
    "wrap",
]


def __getattr__(name: str) -> typing.Any:
    """The names that load with their module on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
