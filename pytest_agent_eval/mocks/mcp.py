"""MCP tools mocked per case (SPEC §28): one patch at the ``mcp`` SDK's ``ClientSession``.

Every MCP client built on it goes through it (the OpenAI Agents SDK's
``MCPServerStdio``/``MCPServerStreamableHttp``, ``langchain-mcp-adapters``, the SDK used directly).

* ``ClientSession.initialize`` notes the server's name on the session: the ``serverInfo.name`` the
  server sends in its initialize result. That is the only name every client sees the same way (a
  framework's own label for a server, such as the OpenAI Agents SDK's ``name=`` or a
  ``MultiServerMCPClient`` key, never reaches the session), so ``tool_mocks`` names an MCP tool
  ``<serverInfo.name>.<tool>``, or ``<tool>`` when it is unique.
* ``ClientSession.list_tools`` notes each server's tools (a mock naming a tool its server lacks is
  an error with a did-you-mean).
* ``ClientSession.call_tool`` answers from the running trial's recording (``mocks.recording``): a
  mocked call never reaches the server and comes back as the server would send it, a
  ``CallToolResult`` (text content; a mapping as JSON text and ``structuredContent``; a ``raise`` as
  ``isError`` with the error's text); an unmocked call follows ``unmocked_tools``. Outside a running
  case the real session answers.

Nothing of ``mcp`` is imported here: ``plugin/mcp.py`` loads this module and calls :func:`install`
once ``mcp.client.session`` is loaded (by the agent's code). Floor: mocks (it uses
``mocks.current``).

Process-wide state, as the patched class is process-wide: ``_PATCHED`` (the methods to restore) and
``TOOLS`` (the tools each server listed, by server name).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import threading
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_agent_eval.core.errors import did_you_mean
from pytest_agent_eval.core.tool_errors import UnmockedToolError
from pytest_agent_eval.faults import describe
from pytest_agent_eval.mocks.current import current_recording

SESSION_MODULE = "mcp.client.session"
_SERVER_ATTR = "_agent_eval_mcp_server"
"""The attribute on a ``ClientSession`` that holds its server's ``serverInfo.name``."""


class ServerTools:
    """The tools each MCP server listed in this process (by server name, a union over sessions)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, dict[str, None]] = {}
        self._standins: set[str | None] = set()

    def note(self, server: str, tools: Iterable[str]) -> None:
        with self._lock:
            self._tools.setdefault(server, {}).update(dict.fromkeys(tools))

    def of(self, server: str) -> list[str] | None:
        """The tools ``server`` listed; ``None`` when it has listed none yet."""
        with self._lock:
            found = self._tools.get(server)
            return None if found is None else list(found)

    def servers_of(self, tool: str) -> list[str]:
        """The servers that listed ``tool``."""
        with self._lock:
            return [server for server, tools in self._tools.items() if tool in tools]

    def forget(self) -> None:
        with self._lock:
            self._tools.clear()
            self._standins.clear()

    def note_standin(self, server: str, tools: Iterable[str]) -> None:
        """A stand-in server this run provides: its defaults answer calls no mock answers."""
        self.note(server, tools)
        with self._lock:
            self._standins.add(server)

    def drop_standins(self, servers: Iterable[str]) -> None:
        """The run that provided these stand-ins ended: forget them.

        A later run's server of that name is a real one.
        """
        with self._lock:
            for server in servers:
                self._standins.discard(server)
                self._tools.pop(server, None)

    def is_standin(self, server: str | None) -> bool:
        with self._lock:
            return server in self._standins


TOOLS = ServerTools()


CLIENT_PACKAGES = (
    "mcp",
    "agents.mcp",
    "langchain_mcp_adapters",
    "pydantic_ai.mcp",
    "pydantic_ai.toolsets.fastmcp",
    "fastmcp",
)
"""The packages whose objects in an agent's module say that the agent is an MCP client."""


def _from_mcp(value: Any) -> bool:
    """Whether ``value`` (a module, a class, a function, an instance) comes from an MCP client."""
    name = (
        value.__name__
        if isinstance(value, types.ModuleType)
        else getattr(value if callable(value) else type(value), "__module__", None)
    )
    return isinstance(name, str) and any(
        name == package or name.startswith(package + ".") for package in CLIENT_PACKAGES
    )


def uses_mcp(agent: Any, module: str | None = None) -> bool:
    """Whether the agent gets tools from MCP servers, as far as can be told before it runs.

    An OpenAI Agents SDK agent with ``mcp_servers``, a pydantic-ai agent with an MCP toolset, or an
    agent whose module holds an MCP client (imported one): a function's module, or ``module`` (of
    its ``module:attr`` reference). Loading ``mcp`` is not enough (the Agents SDK loads it for every
    agent), so an agent with Python tools only keeps the strict pre-run check of its mocks.
    """
    with contextlib.suppress(Exception):  # a property of the user's object may raise: not MCP
        if getattr(agent, "mcp_servers", None):
            return True
        toolsets = getattr(agent, "toolsets", None)
        if isinstance(toolsets, (list, tuple)) and any(_from_mcp(t) for t in toolsets):
            return True
    func = getattr(agent, "__func__", agent)  # a bound method: its function
    func = getattr(func, "func", func)  # a functools.partial: its function
    spaces = [getattr(func, "__globals__", None)]
    if module:
        spaces.append(getattr(sys.modules.get(module), "__dict__", None))
    return any(
        _from_mcp(value)
        for space in spaces
        if isinstance(space, dict)
        for value in list(space.values())
    )


def mcp_names(names: Sequence[str], agent_uses_mcp: bool) -> list[str]:
    """The mocked names an MCP server may serve.

    A ``server.tool``, a tool of a stand-in server (known before any run), and, for an agent that
    uses MCP (:func:`uses_mcp`), any name.
    """
    return [
        name
        for name in names
        if "." in name or agent_uses_mcp or any(map(TOOLS.is_standin, TOOLS.servers_of(name)))
    ]


def mock_problems(names: Sequence[str]) -> list[str]:
    """Problems of mocked MCP tool names (:func:`mcp_names`).

    A ``server.tool`` whose server listed its tools without ``tool`` (with a did-you-mean), a bare
    name that two servers serve. Any other name may be a tool of a server not listed yet: whether it
    was called is told after the trial.
    """
    problems = []
    for name in names:
        server, dot, tool = name.partition(".")
        listed = TOOLS.of(server) if dot else None
        if listed is not None and tool not in listed:
            problems.append(
                f"tool_mocks: {name!r}: the MCP server {server!r} has no tool {tool!r}"
                f"{did_you_mean(tool, listed)}; its tools: {', '.join(listed) or '(none)'}"
            )
        servers = TOOLS.servers_of(name) if not dot else []
        if len(servers) > 1:
            problems.append(
                f"tool_mocks: {name!r} is served by MCP servers {', '.join(servers)}: name it "
                f"{' or '.join(repr(f'{s}.{name}') for s in servers)}"
            )
    return problems


def server_of(session: Any) -> str | None:
    """The ``serverInfo.name`` a session's server sent (``None``: initialized before the patch)."""
    name = getattr(session, _SERVER_ATTR, None)
    return name if isinstance(name, str) else None


def plain(result: Any) -> Any:
    """A ``CallToolResult`` as the record holds it.

    That is its structured content, else its text (blocks joined by a newline), else the content
    blocks as data.
    """
    structured = getattr(result, "structuredContent", None)
    if structured is not None:
        return structured
    blocks = list(getattr(result, "content", None) or [])
    texts = [block.text for block in blocks if getattr(block, "type", None) == "text"]
    if len(texts) == len(blocks):
        return "\n".join(texts)
    return [block.model_dump(mode="json", exclude_none=True) for block in blocks]


def as_result(value: Any, error: bool = False) -> Any:
    """A mock's value as the ``CallToolResult`` a server sends.

    A string as text; a mapping as JSON text and ``structuredContent``; any other value as JSON
    text; a ``CallToolResult`` as it is.
    """
    from mcp.types import CallToolResult, TextContent

    if isinstance(value, CallToolResult):
        return value
    if isinstance(value, str):
        return CallToolResult(content=[TextContent(type="text", text=value)], isError=error)
    text = json.dumps(value, ensure_ascii=False, default=str)
    structured = dict(value) if isinstance(value, dict) else None
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structuredContent=structured, isError=error
    )


async def _answer(
    original: Callable[..., Any], session: Any, name: str, arguments: Any, *a: Any, **kw: Any
) -> Any:
    """A ``call_tool`` of a running trial, answered by the recording or the server.

    The recording answers a mocked call; the server one passed through.
    """
    recording = current_recording(f"MCP tool {name!r}")
    if recording is None:
        return await original(session, name, arguments, *a, **kw)
    server = server_of(session)
    real: list[Any] = []

    async def call_server() -> Any:
        real.append(None)
        trial, uri = _trial(), f"mcp://{server}/tools/call"
        body = json.dumps({"name": name, "arguments": arguments or {}}, sort_keys=True, default=str)
        result = _replayed(trial, uri, body, "CallToolResult")
        if result is None:
            result = await original(session, name, arguments, *a, **kw)
            _record(trial, uri, body, result)
        real[0] = result
        return plain(result)

    args = dict(arguments) if isinstance(arguments, dict) else {}
    try:
        value = await recording.ahandle(
            name, args, call_server, server=server, standin=TOOLS.is_standin(server)
        )
    except UnmockedToolError:
        raise
    except Exception as exc:
        if real:  # the server's or the transport's own error: as it is
            raise
        return as_result(
            describe(exc), error=True
        )  # a mocked error: as a server reports its tool's error
    return real[0] if real else as_result(value)


class McpReplayMiss(RuntimeError):
    """Under ``--agent-eval-replay``, an MCP request the case's cassette has no answer to."""


def _trial() -> Any:
    """The running trial's traffic scope (``traffic.scope``) when it records or replays a cassette.

    Else None.
    """
    scope = sys.modules.get(
        "pytest_agent_eval.traffic.scope"
    )  # not loaded: no traffic option is on
    trial = scope.CURRENT.get() if scope is not None else None
    if trial is None or trial.case.cassette is None or trial.case.mode is None:
        return None
    return trial


def _replayed(trial: Any, uri: str, body: str | None, kind: str) -> Any:
    """The recorded answer (an ``mcp.types`` ``kind``) to an MCP request, or None to ask the server.

    Under replay a miss is the trial's infrastructure failure, raised as :class:`McpReplayMiss`.
    """
    if trial is None or trial.case.mode == "record":
        return None
    from mcp import types as mcp_types

    from pytest_agent_eval.traffic.cassette import match_key

    cassette = trial.case.cassette
    hit = cassette.take(match_key("MCP", uri, body, cassette.ignore))
    if hit is not None:
        return getattr(mcp_types, kind).model_validate_json(hit.response_bytes)
    if trial.case.mode != "replay":
        return None
    where = "no recorded answer in" if cassette.exists else "no cassette"
    message = (
        f"replay miss: MCP {uri}{' ' + body if body else ''} ({where} {trial.case.cassette_name}; "
        "record it with --agent-eval-record=new)"
    )
    trial.fail(message)
    raise McpReplayMiss(message)


def _record(trial: Any, uri: str, body: str | None, result: Any) -> None:
    """Keep an MCP answer in the trial's cassette when recording.

    Secrets are scrubbed, as in HTTP answers.
    """
    if trial is None or trial.case.mode not in ("record", "new"):
        return
    from pytest_agent_eval.traffic.cassette import Interaction, body_text

    answer = result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")
    trial.case.cassette.add(
        Interaction(
            method="MCP",
            uri=uri,
            request_body=body_text(body.encode("utf-8")) if body is not None else None,
            request_type="application/json" if body is not None else None,
            status=200,
            reason="OK",
            response_type="application/json",
            response_body=body_text(answer),
            trial=trial.number,
        )
    )


_LOCK = threading.Lock()
_PATCHED: dict[int, tuple[type, dict[str, Any]]] = {}
"""Each patched ``ClientSession`` class and the methods the patch replaced, to restore.

A module loaded anew, as pytester's runs do, has its own class.
"""
_MARK = "__agent_eval_mcp__"


def installed() -> bool:
    """Whether ``ClientSession`` is patched (an MCP client is in use)."""
    with _LOCK:
        return bool(_PATCHED)


def install(module: types.ModuleType) -> None:
    """Patch ``module.ClientSession`` (``module``: ``mcp.client.session``, loaded); idempotent."""
    with _LOCK:
        session = module.ClientSession
        if getattr(session.__dict__.get("call_tool"), _MARK, False):
            return
        originals = {
            name: session.__dict__[name] for name in ("initialize", "list_tools", "call_tool")
        }

        async def initialize(self: Any, *a: Any, **kw: Any) -> Any:
            trial = _trial()
            result = _replayed(trial, "mcp://initialize", None, "InitializeResult")
            if result is None:
                result = await originals["initialize"](self, *a, **kw)
                _record(trial, "mcp://initialize", None, result)
            elif hasattr(
                self, "_server_capabilities"
            ):  # answered from the cassette: as the SDK keeps it
                self._server_capabilities = result.capabilities
            setattr(self, _SERVER_ATTR, str(result.serverInfo.name))
            return result

        async def list_tools(self: Any, *a: Any, **kw: Any) -> Any:
            server = server_of(self)
            trial, uri = _trial(), f"mcp://{server}/tools/list"
            result = _replayed(trial, uri, None, "ListToolsResult")
            if result is None:
                result = await originals["list_tools"](self, *a, **kw)
                _record(trial, uri, None, result)
            if server is not None:
                TOOLS.note(server, [tool.name for tool in result.tools])
            return result

        async def call_tool(self: Any, name: str, arguments: Any = None, *a: Any, **kw: Any) -> Any:
            return await _answer(originals["call_tool"], self, name, arguments, *a, **kw)

        made: dict[str, Callable[..., Any]] = {
            "initialize": initialize,
            "list_tools": list_tools,
            "call_tool": call_tool,
        }
        for name, patched in made.items():
            functools.update_wrapper(patched, originals[name])
            setattr(patched, _MARK, True)
            setattr(session, name, patched)
        _PATCHED[id(session)] = (session, originals)


def uninstall() -> None:
    """Restore ``ClientSession``'s own methods and forget the servers' tools."""
    with _LOCK:
        for session, originals in _PATCHED.values():
            for name, original in originals.items():
                setattr(session, name, original)
        _PATCHED.clear()
        TOOLS.forget()
