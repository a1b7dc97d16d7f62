"""Command-line and ini options, read once into a typed settings object."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

DEFAULT_FILES = "eval_*.yaml eval_*.yml eval_*.json *.eval.yaml *.eval.yml *.eval.json"


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
    parser.addini("agent_eval_files", "glob patterns of eval file names", type="args", default=DEFAULT_FILES.split())
    parser.addini("agent_eval_timeout", "default per-call agent timeout in seconds", default="")


@dataclass(frozen=True)
class Settings:
    """Every option of the plugin, read once per session."""

    agent: str | None
    file_patterns: tuple[str, ...]
    timeout: float | None
    verbose: int

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        timeout = config.getoption("agent_eval_timeout")
        if timeout is None and config.getini("agent_eval_timeout"):
            timeout = float(config.getini("agent_eval_timeout"))
        return cls(
            agent=config.getoption("agent_eval_agent"),
            file_patterns=tuple(config.getini("agent_eval_files")),
            timeout=timeout,
            verbose=config.get_verbosity(),
        )
