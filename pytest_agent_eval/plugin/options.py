"""Command-line and ini options, read once into a typed settings object."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from pytest_agent_eval.core.files import DEFAULT_FILES, is_eval_file, orphan_sidecar
from pytest_agent_eval.core.names import AGENT_NAME_PATTERN, UNMOCKED_MODES
from pytest_agent_eval.traffic.options import TrafficOptions

__all__ = ["Settings", "add_options", "is_eval_file", "option_group", "orphan_sidecar"]


def option_group(parser: pytest.Parser) -> pytest.OptionGroup:
    """The plugin's group of options in ``pytest --help``.

    For every feature module's ``pytest_addoption``.
    """
    return parser.getgroup(
        "agent-eval", "pytest-agent-eval: LLM agent evals from YAML/JSON golden sets"
    )


def add_options(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--agent",
        dest="agent_eval_agent",
        metavar="MODULE:ATTR",
        default=None,
        help="the agent every case runs (overrides the file's `agent:` and the `agent` fixture)",
    )
    group.addoption(
        "--agent-eval-agent",
        dest="agent_eval_matrix",
        metavar="NAME=MODULE:ATTR",
        action="append",
        default=[],
        help="run every case against this agent as the variant case[NAME] (repeatable: a matrix; "
        "replaces the files' `agent:`/`agents:`, not a case's own `agent:`)",
    )
    group.addoption(
        "--agent-eval-timeout",
        dest="agent_eval_timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help="default per-call agent timeout for cases without `timeout:` (ini: "
        "agent_eval_timeout)",
    )
    group.addoption(
        "--agent-eval-concurrency",
        dest="agent_eval_concurrency",
        metavar="N",
        type=int,
        default=None,
        help="up to N agent calls in flight in this process, across upcoming cases and trials "
        "(ini: agent_eval_concurrency; default 1)",
    )
    group.addoption(
        "--agent-eval-repeat",
        dest="agent_eval_repeat",
        metavar="N",
        type=int,
        default=None,
        help="run every case N times (independent trials; each case's min_pass_rate decides)",
    )
    group.addoption(
        "--agent-eval-require-llm",
        dest="agent_eval_require_llm",
        action="store_true",
        default=None,
        help="fail, instead of leaving 'not scored', a check that needs an LLM when none is "
        "configured (ini: agent_eval_require_llm)",
    )
    group.addoption(
        "--agent-eval-resume",
        dest="agent_eval_resume",
        metavar="REPORT",
        default=None,
        help="run only the eval cases REPORT has no final record of; the report holds REPORT's "
        "records and the new",
    )
    parser.addini(
        "agent_eval_require_llm",
        "fail LLM checks when no LLM is configured",
        type="bool",
        default=False,
    )
    parser.addini(
        "agent_eval_concurrency", "agent calls in flight at once in one pytest process", default="1"
    )
    parser.addini(
        "agent_eval_files",
        "glob patterns of eval file names",
        type="args",
        default=DEFAULT_FILES.split(),
    )
    parser.addini("agent_eval_timeout", "default per-call agent timeout in seconds", default="")
    parser.addini(
        "agent_eval_tool_dispatch",
        "module:function of the agent's tool dispatcher (name, args) -> result that tool mocks "
        "patch, for eval files without `tool_dispatch:`",
        default="",
    )
    parser.addini(
        "agent_eval_unmocked_tools",
        "what a call to a tool without a mock response does: strict (fails the case), default, "
        "passthrough",
        default="strict",
    )
    parser.addini(
        "agent_eval_tool_responses",
        "JSON/YAML file of {tool: response} used as default tool mocks (relative to the rootdir)",
        default="",
    )


class Settings(NamedTuple):
    """Every option of the plugin, read once per session."""

    agent: str | None
    file_patterns: tuple[str, ...]
    timeout: float | None
    tool_dispatch: str | None = None
    unmocked_tools: str = "strict"
    tool_responses: Path | None = None
    concurrency: int = 1
    repeat: int | None = None
    require_llm: bool = False
    traffic: TrafficOptions = TrafficOptions()
    matrix: tuple[tuple[str, str], ...] = ()
    """``--agent-eval-agent NAME=MODULE:ATTR``, in order."""

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        from pytest_agent_eval.plugin.traffic import read_options as read_traffic

        timeout = config.getoption("agent_eval_timeout")
        if timeout is None and config.getini("agent_eval_timeout"):
            timeout = float(config.getini("agent_eval_timeout"))
        unmocked = str(config.getini("agent_eval_unmocked_tools")).strip() or "strict"
        if unmocked not in UNMOCKED_MODES:
            raise pytest.UsageError(
                f"ini agent_eval_unmocked_tools = {unmocked!r}: use one of "
                f"{', '.join(UNMOCKED_MODES)}"
            )
        responses = str(config.getini("agent_eval_tool_responses")).strip()
        concurrency = config.getoption("agent_eval_concurrency")
        if concurrency is None:
            concurrency = positive_int(
                str(config.getini("agent_eval_concurrency")), "ini agent_eval_concurrency"
            )
        repeat = config.getoption("agent_eval_repeat")
        k = config.getoption("agent_eval_k")
        for value, name in (
            (concurrency, "--agent-eval-concurrency"),
            (repeat, "--agent-eval-repeat"),
            (k, "--agent-eval-k"),
        ):
            if value is not None and value < 1:
                raise pytest.UsageError(f"{name} must be at least 1, got {value}")
        agent = config.getoption("agent_eval_agent")
        matrix = _matrix(config.getoption("agent_eval_matrix") or [])
        if agent and matrix:
            raise pytest.UsageError(
                "--agent and --agent-eval-agent: choose one (--agent runs one agent everywhere)"
            )
        return cls(
            agent=agent,
            matrix=matrix,
            file_patterns=tuple(config.getini("agent_eval_files")),
            timeout=timeout,
            tool_dispatch=str(config.getini("agent_eval_tool_dispatch")).strip() or None,
            unmocked_tools=unmocked,
            tool_responses=config.rootpath / responses if responses else None,
            concurrency=concurrency,
            repeat=repeat,
            require_llm=bool(
                config.getoption("agent_eval_require_llm")
                or config.getini("agent_eval_require_llm")
            ),
            traffic=read_traffic(config),
        )


def _matrix(values: list[str]) -> tuple[tuple[str, str], ...]:
    """``NAME=MODULE:ATTR`` values, checked: a usage error names the value and the form it needs."""
    seen: dict[str, str] = {}
    for value in values:
        name, _, ref = value.partition("=")
        name, ref = name.strip(), ref.strip()
        if not re.match(AGENT_NAME_PATTERN, name) or not re.match(
            r"^([\w.]+:[\w.]+|https?://.+)$", ref
        ):
            raise pytest.UsageError(
                f"--agent-eval-agent {value!r}: give NAME=MODULE:ATTR (or NAME=http://...), e.g. "
                "--agent-eval-agent fast=myproject.agent:run (NAME: letters, digits, '_' and '-')"
            )
        if name in seen:
            raise pytest.UsageError(f"--agent-eval-agent: the name {name!r} is given twice")
        seen[name] = ref
    return tuple(seen.items())


def positive_int(text: str, name: str, minimum: int = 1) -> int:
    try:
        value = int(text.strip() or str(minimum))
    except ValueError:
        raise pytest.UsageError(
            f"{name} = {text!r}: give a whole number of at least {minimum}"
        ) from None
    if value < minimum:
        raise pytest.UsageError(f"{name} must be at least {minimum}, got {value}")
    return value
