"""Command-line and ini options, read once into a typed settings object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_agent_eval.cases.files import DEFAULT_FILES, is_eval_file
from pytest_agent_eval.cases.model import UNMOCKED_MODES

__all__ = ["Settings", "add_options", "is_eval_file"]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("agent-eval", "pytest-agent-eval: LLM agent evals from YAML/JSON golden sets")
    group.addoption(
        "--agent",
        dest="agent_eval_agent",
        metavar="MODULE:ATTR",
        default=None,
        help="the agent every case runs (overrides the file's `agent:` and the `agent` fixture)",
    )
    group.addoption(
        "--agent-eval-timeout",
        dest="agent_eval_timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help="default per-call agent timeout for cases without `timeout:` (ini: agent_eval_timeout)",
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
        help="fail, instead of leaving 'not scored', a check that needs an LLM when none is configured "
        "(ini: agent_eval_require_llm)",
    )
    group.addoption(
        "--agent-eval-report",
        dest="agent_eval_report",
        metavar="PATH",
        default=None,
        help="write the run's metadata and every case's record as JSON to PATH (schema: agent-eval schema --report)",
    )
    group.addoption(
        "--agent-eval-baseline",
        dest="agent_eval_baseline",
        metavar="PATH",
        default=None,
        help="compare this run with an earlier --agent-eval-report file: regressions, fixes, new, missing",
    )
    group.addoption(
        "--agent-eval-tolerance",
        dest="agent_eval_tolerance",
        metavar="X",
        type=float,
        default=0.05,
        help="a score drop larger than X against the baseline is a regression (default 0.05)",
    )
    group.addoption(
        "--agent-eval-significance",
        dest="agent_eval_significance",
        metavar="P",
        type=float,
        default=0.05,
        help="a repeated case's pass-rate drop is a regression when Fisher's exact test gives p < P (default 0.05)",
    )
    group.addoption(
        "--agent-eval-fail-on-regression",
        dest="agent_eval_fail_on_regression",
        action="store_true",
        default=False,
        help="a regression against the baseline fails the run",
    )
    group.addoption(
        "--agent-eval-gate",
        dest="agent_eval_gate",
        choices=["regressions"],
        default=None,
        help="regressions: the exit status depends on regressions against the baseline alone",
    )
    parser.addini("agent_eval_require_llm", "fail LLM checks when no LLM is configured", type="bool", default=False)
    parser.addini("agent_eval_concurrency", "agent calls in flight at once in one pytest process", default="1")
    parser.addini("agent_eval_files", "glob patterns of eval file names", type="args", default=DEFAULT_FILES.split())
    parser.addini("agent_eval_timeout", "default per-call agent timeout in seconds", default="")
    parser.addini(
        "agent_eval_tool_dispatch",
        "module:function of the agent's tool dispatcher (name, args) -> result that tool mocks patch, for eval "
        "files without `tool_dispatch:`",
        default="",
    )
    parser.addini(
        "agent_eval_unmocked_tools",
        "what a call to a tool without a mock response does: strict (fails the case), default, passthrough",
        default="strict",
    )
    parser.addini(
        "agent_eval_tool_responses",
        "JSON/YAML file of {tool: response} used as default tool mocks (relative to the rootdir)",
        default="",
    )


@dataclass(frozen=True)
class Settings:
    """Every option of the plugin, read once per session."""

    agent: str | None
    file_patterns: tuple[str, ...]
    timeout: float | None
    verbose: int
    tool_dispatch: str | None = None
    unmocked_tools: str = "strict"
    tool_responses: Path | None = None
    concurrency: int = 1
    repeat: int | None = None
    require_llm: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        timeout = config.getoption("agent_eval_timeout")
        if timeout is None and config.getini("agent_eval_timeout"):
            timeout = float(config.getini("agent_eval_timeout"))
        unmocked = str(config.getini("agent_eval_unmocked_tools")).strip() or "strict"
        if unmocked not in UNMOCKED_MODES:
            raise pytest.UsageError(
                f"ini agent_eval_unmocked_tools = {unmocked!r}: use one of {', '.join(UNMOCKED_MODES)}"
            )
        responses = str(config.getini("agent_eval_tool_responses")).strip()
        concurrency = config.getoption("agent_eval_concurrency")
        if concurrency is None:
            concurrency = _positive_int(str(config.getini("agent_eval_concurrency")), "ini agent_eval_concurrency")
        repeat = config.getoption("agent_eval_repeat")
        for value, name in ((concurrency, "--agent-eval-concurrency"), (repeat, "--agent-eval-repeat")):
            if value is not None and value < 1:
                raise pytest.UsageError(f"{name} must be at least 1, got {value}")
        return cls(
            agent=config.getoption("agent_eval_agent"),
            file_patterns=tuple(config.getini("agent_eval_files")),
            timeout=timeout,
            verbose=config.get_verbosity(),
            tool_dispatch=str(config.getini("agent_eval_tool_dispatch")).strip() or None,
            unmocked_tools=unmocked,
            tool_responses=config.rootpath / responses if responses else None,
            concurrency=concurrency,
            repeat=repeat,
            require_llm=bool(config.getoption("agent_eval_require_llm") or config.getini("agent_eval_require_llm")),
        )


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text.strip() or "1")
    except ValueError:
        raise pytest.UsageError(f"{name} = {text!r}: give a whole number of at least 1") from None
    if value < 1:
        raise pytest.UsageError(f"{name} must be at least 1, got {value}")
    return value
