"""Command-line and ini options, read once into a typed settings object."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from pytest_agent_eval.core.case import AGENT_NAME_PATTERN, UNMOCKED_MODES
from pytest_agent_eval.core.files import DEFAULT_FILES, is_eval_file, orphan_sidecar
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
    _add_traffic_options(group, parser)
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


def _add_traffic_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """SPEC §14: the options of the hook on the agent's HTTP traffic to its LLM.

    Usage, record/replay, budgets, retries.
    """
    group.addoption(
        "--agent-eval-traffic",
        dest="agent_eval_traffic",
        action="store_true",
        default=None,
        help="watch each case's HTTP traffic (httpx): token usage and cost per case, retries of "
        "429/5xx (ini: agent_eval_traffic; on by itself with any option below)",
    )
    group.addoption(
        "--agent-eval-record",
        dest="agent_eval_record",
        nargs="?",
        const="all",
        choices=("all", "new"),
        default=None,
        help="record each case's HTTP traffic into cassettes/<file stem>/<case id>.yaml "
        "(=new: keep recorded answers, record only what is missing)",
    )
    group.addoption(
        "--agent-eval-replay",
        dest="agent_eval_replay",
        action="store_true",
        default=False,
        help="answer each case's HTTP requests from its cassette, never the network (a request "
        "not recorded errors its case)",
    )
    group.addoption(
        "--agent-eval-retries",
        dest="agent_eval_retries",
        metavar="N",
        type=int,
        default=None,
        help="retry an LLM request answered 429 or 5xx up to N times, honouring Retry-After (ini: "
        "agent_eval_retries; default 3)",
    )
    group.addoption(
        "--agent-eval-rate-limit",
        dest="agent_eval_rate_limit",
        metavar="N/s|N/min|N/h",
        default=None,
        help="request budget for the whole run, shared by every worker (ini: "
        "agent_eval_rate_limit)",
    )
    group.addoption(
        "--agent-eval-token-limit",
        dest="agent_eval_token_limit",
        metavar="N/s|N/min|N/h",
        default=None,
        help="token budget for the whole run, debited from each response's usage (ini: "
        "agent_eval_token_limit)",
    )
    group.addoption(
        "--agent-eval-rate-limit-url",
        dest="agent_eval_rate_limit_url",
        metavar="redis://HOST:PORT/DB",
        default=None,
        help="keep the budgets in Redis, shared across machines (ini: agent_eval_rate_limit_url; "
        "extra 'redis')",
    )
    group.addoption(
        "--agent-eval-pace",
        dest="agent_eval_pace",
        choices=("on", "off"),
        default=None,
        help="one pace for the run's LLM requests: a 429's cool-down and the rate the provider "
        "announces slow every worker together, so that no case is lost to a rate limit (ini: "
        "agent_eval_pace; default on)",
    )
    parser.addini(
        "agent_eval_traffic", "watch each case's HTTP traffic: usage, cost, retries", type="bool"
    )
    parser.addini(
        "agent_eval_pace", "one pace for the run's LLM requests: on (default) or off", default="on"
    )
    parser.addini(
        "agent_eval_retries", "retries of an LLM request answered 429 or 5xx", default="3"
    )
    parser.addini(
        "agent_eval_rate_limit", "request budget for the whole run (N/s, N/min, N/h)", default=""
    )
    parser.addini(
        "agent_eval_token_limit", "token budget for the whole run (N/s, N/min, N/h)", default=""
    )
    parser.addini(
        "agent_eval_rate_limit_url", "redis:// URL where the budgets are kept", default=""
    )
    parser.addini(
        "agent_eval_cassettes",
        "folder of the cassettes (relative to the rootdir); default: cassettes/ beside each eval "
        "file",
        default="",
    )
    parser.addini(
        "agent_eval_match_ignore",
        "JSON fields of request bodies left out when matching recorded requests",
        type="args",
        default=[],
    )
    parser.addini(
        "agent_eval_prices",
        "LLM prices, $ per million tokens: JSON {model: {input, output}} or a JSON file "
        "(relative to the rootdir); merged over the built-in table",
        default="",
    )


def read_traffic_options(config: pytest.Config) -> TrafficOptions:
    """The traffic hook's options, from the command line and the ini file."""

    def value(name: str) -> str | None:
        given = config.getoption(name)
        return str(given) if given is not None else (str(config.getini(name)).strip() or None)

    record = config.getoption("agent_eval_record")
    if record is not None and config.getoption("agent_eval_replay"):
        raise pytest.UsageError("--agent-eval-record and --agent-eval-replay: choose one")
    replay = "replay" if config.getoption("agent_eval_replay") else None
    mode = {"all": "record", "new": "new"}.get(record or "") or replay
    retries = config.getoption("agent_eval_retries")
    if retries is None:
        retries = _positive_int(
            str(config.getini("agent_eval_retries")), "ini agent_eval_retries", minimum=0
        )
    elif retries < 0:
        raise pytest.UsageError(f"--agent-eval-retries must be at least 0, got {retries}")
    cassettes = str(config.getini("agent_eval_cassettes")).strip()
    options = TrafficOptions(
        record=mode,
        retries=retries,
        rate_limit=value("agent_eval_rate_limit"),
        token_limit=value("agent_eval_token_limit"),
        rate_limit_url=value("agent_eval_rate_limit_url"),
        cassettes=config.rootpath / cassettes if cassettes else None,
        match_ignore=tuple(config.getini("agent_eval_match_ignore")),
        prices=str(config.getini("agent_eval_prices")).strip(),
        pace=(
            config.getoption("agent_eval_pace")
            or str(config.getini("agent_eval_pace")).strip()
            or "on"
        )
        != "off",
    )
    # the trace options (plugin/traces.py) turn the hook on: a chat span for every LLM request
    traced = any(
        config.getoption(f"agent_eval_{name}", None) is not None for name in ("traces", "otlp")
    )
    wanted = (
        traced
        or config.getoption("agent_eval_traffic")
        or config.getini("agent_eval_traffic")
        or config.getoption("agent_eval_retries") is not None
        or mode
        or options.rate_limit
        or options.token_limit
        or options.prices
    )
    return replace(options, on=bool(wanted), keep_calls=traced)


@dataclass(frozen=True)
class Settings:
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
    traffic: TrafficOptions = field(default_factory=TrafficOptions)
    matrix: tuple[tuple[str, str], ...] = ()
    """``--agent-eval-agent NAME=MODULE:ATTR``, in order."""

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
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
            concurrency = _positive_int(
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
            traffic=read_traffic_options(config),
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


def _positive_int(text: str, name: str, minimum: int = 1) -> int:
    try:
        value = int(text.strip() or str(minimum))
    except ValueError:
        raise pytest.UsageError(
            f"{name} = {text!r}: give a whole number of at least {minimum}"
        ) from None
    if value < minimum:
        raise pytest.UsageError(f"{name} must be at least {minimum}, got {value}")
    return value
