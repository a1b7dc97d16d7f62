"""Stand-in MCP servers declared in YAML (SPEC §28), so a case needs no real server.

They have their tools, input schemas and default responses, served by the official SDK's FastMCP
over stdio or loopback streamable HTTP.

The block (an eval file's or the ini ``agent_eval_mcp_servers`` file's ``mcp_servers:``)::

    mcp_servers:
      weather:                      # its serverInfo.name: mocks say weather.<tool>
        transport: stdio            # or http (loopback streamable HTTP); stdio when left out
        tools:
          get_forecast:
            description: The forecast for a city.
            input_schema: {type: object, properties: {city: {type: string}}, required: [city]}
            response: "sunny"       # the default answer; a case's tool_mocks answer first

:func:`parse_servers` checks a block (an error names ``path:line``); ``python -m
pytest_agent_eval.mocks.mcp_standin SPEC.json [--http PORT]`` serves one server (:func:`main`). The
data is never executed: a response is a value, a schema is read as JSON Schema. Floor: mocks
(``mocks.mcp`` makes the results).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agent_eval.core.document import Document
from pytest_agent_eval.core.errors import EvalFileError, did_you_mean

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
TRANSPORTS = ("stdio", "http")
_SERVER_KEYS = ("transport", "tools", "description")
_TOOL_KEYS = ("description", "input_schema", "response")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class StandinTool:
    """One tool of a stand-in server."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(_EMPTY_SCHEMA))
    response: Any = ""


@dataclass(frozen=True)
class StandinServer:
    """A stand-in server: its name, transport and tools; where it was declared.

    The name is its ``serverInfo.name``.
    """

    name: str
    transport: str
    tools: dict[str, StandinTool]
    where: str = ""
    """``path:line`` of its declaration."""

    def to_json(self) -> dict[str, Any]:
        """What the stand-in process is handed (:func:`main`)."""
        return {
            "name": self.name,
            "tools": [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                    "response": t.response,
                }
                for t in self.tools.values()
            ],
        }

    def env_name(self, what: str) -> str:
        """``AGENT_EVAL_MCP_<NAME>_<WHAT>``: the name upper-cased, ``-`` as ``_``."""
        return f"AGENT_EVAL_MCP_{self.name.upper().replace('-', '_')}_{what}"


def parse_servers(
    doc: Document, key: tuple[Any, ...] = ("mcp_servers",)
) -> dict[str, StandinServer]:
    """The servers of the block at ``key`` in ``doc``.

    :class:`EvalFileError` at the ``path:line`` of the first problem (what is wrong and what to
    write instead).
    """
    block = _at(doc.data, key)

    def error(at: tuple[Any, ...], message: str) -> EvalFileError:
        return EvalFileError(doc.path, doc.line(at), f"mcp_servers: {message}")

    if not isinstance(block, dict) or not block:
        raise error(key, "give a mapping of server name to {transport, tools}")
    servers = {}
    for name, spec in block.items():
        at = (*key, name)
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise error(
                at, f"server name {name!r}: use letters, digits, '_' or '-', starting with a letter"
            )
        if not isinstance(spec, dict):
            raise error(
                at, f"server {name!r}: give a mapping with `tools:` (and `transport: stdio|http`)"
            )
        for unknown in [k for k in spec if k not in _SERVER_KEYS]:
            raise error(
                (*at, unknown),
                f"server {name!r}: unknown key {unknown!r}"
                f"{did_you_mean(str(unknown), _SERVER_KEYS)}",
            )
        transport = spec.get("transport", "stdio")
        if transport not in TRANSPORTS:
            raise error(
                (*at, "transport"), f"server {name!r}: transport {transport!r}: use stdio or http"
            )
        tools = spec.get("tools")
        if not isinstance(tools, dict) or not tools:
            raise error(
                (*at, "tools"),
                f"server {name!r}: `tools:` must map each tool name to its description",
            )
        servers[name] = StandinServer(
            name,
            transport,
            {t: _tool(error, (*at, "tools", t), t, raw) for t, raw in tools.items()},
            f"{doc.path}:{doc.line(at)}",
        )
    return servers


def _tool(error: Any, at: tuple[Any, ...], name: Any, raw: Any) -> StandinTool:
    if not isinstance(name, str) or not name:
        raise error(at, f"tool name {name!r}: give a non-empty string")
    if raw is None:
        return StandinTool(name)
    if not isinstance(raw, dict):
        raise error(at, f"tool {name!r}: give a mapping with description, input_schema, response")
    for unknown in [k for k in raw if k not in _TOOL_KEYS]:
        raise error(
            (*at, unknown),
            f"tool {name!r}: unknown key {unknown!r}{did_you_mean(str(unknown), _TOOL_KEYS)}",
        )
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise error((*at, "description"), f"tool {name!r}: description must be a string")
    schema = raw.get("input_schema", _EMPTY_SCHEMA)
    problem = _schema_problem(schema)
    if problem:
        raise error((*at, "input_schema"), f"tool {name!r}: input_schema {problem}")
    return StandinTool(name, description, dict(schema), raw.get("response", ""))


def _schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be a tool's input schema (a JSON Schema of an object), or ``None``."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "must be a JSON Schema with `type: object`"
    import jsonschema  # a core dependency; loaded with the first stand-in

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    return None


def _at(data: Any, key: tuple[Any, ...]) -> Any:
    for part in key:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def load_servers(path: Path) -> dict[str, StandinServer]:
    """The ``mcp_servers:`` of a YAML or JSON file (the ini ``agent_eval_mcp_servers``)."""
    from pytest_agent_eval.core.document import read_document

    doc = read_document(path)
    if not isinstance(doc.data, dict) or "mcp_servers" not in doc.data:
        raise EvalFileError(
            path, 1, "give the stand-in servers under a top-level `mcp_servers:` key"
        )
    return parse_servers(doc)


def serve(spec: dict[str, Any], port: int | None = None) -> None:
    """Serve the stand-in ``spec`` (:meth:`StandinServer.to_json`) with FastMCP.

    It is served over stdio, or over streamable HTTP on ``127.0.0.1:port``. Its tools answer their
    default response; their arguments are checked against their input schema first (a call that does
    not fit is an ``isError`` result, as a real server's).
    """
    import jsonschema
    from mcp.server.fastmcp import FastMCP
    from mcp.types import Tool

    from pytest_agent_eval.mocks.mcp import as_result

    tools = {tool["name"]: tool for tool in spec["tools"]}

    class StandinFastMCP(FastMCP):
        async def list_tools(self) -> list[Tool]:
            return [
                Tool(name=t["name"], description=t["description"], inputSchema=t["input_schema"])
                for t in tools.values()
            ]

        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            tool = tools.get(name)
            if tool is None:
                return as_result(f"unknown tool {name!r}{did_you_mean(name, tools)}", error=True)
            try:
                jsonschema.validate(arguments or {}, tool["input_schema"])
            except jsonschema.ValidationError as exc:
                return as_result(f"invalid arguments for {name}: {exc.message}", error=True)
            return as_result(tool["response"])

    server = StandinFastMCP(spec["name"], host="127.0.0.1", port=port or 8000, log_level="WARNING")
    server.run("streamable-http" if port else "stdio")


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_agent_eval.mocks.mcp_standin SPEC.json [--http PORT]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    port = None
    if "--http" in args:
        at = args.index("--http")
        port = int(args[at + 1])
        del args[at : at + 2]
    if len(args) != 1:
        print(
            "usage: python -m pytest_agent_eval.mocks.mcp_standin SPEC.json [--http PORT]",
            file=sys.stderr,
        )
        return 2
    serve(json.loads(Path(args[0]).read_text(encoding="utf-8")), port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
