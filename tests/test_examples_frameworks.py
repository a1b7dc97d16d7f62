"""examples/frameworks: one support agent on three frameworks, one eval file running each case.

The agent is built with the OpenAI Agents SDK, pydantic-ai and LangGraph; one eval file runs every
case against each (a matrix), the tool mocks replace each framework's own tools, and a two-turn
conversation reaches each framework its own way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_run import OTHER_PLUGINS_OFF

for framework in ("agents", "pydantic_ai", "langgraph.prebuilt", "langchain_openai"):
    pytest.importorskip(framework, reason="the dev extra installs the frameworks")

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER", "FRAMEWORKS_LLM_URL")
    }
    env["FRAMEWORKS_REAL_TOOL_LOG"] = str(tmp_path / "real_tools.log")
    env["PYTEST_ADDOPTS"] = OTHER_PLUGINS_OFF
    command = [
        sys.executable,
        "-m",
        "pytest",
        "examples/frameworks",
        "-p",
        "no:cacheprovider",
        "-v",
        *args,
    ]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_every_framework_runs_the_shared_cases_with_its_tools_mocked(tmp_path: Path) -> None:
    done = _run(tmp_path, "--agent-eval-report", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout[-3000:]
    names = ("openai_agents", "pydantic_ai", "langgraph")
    for case in ("order_status", "shipping_time", "follow_up"):
        for name in names:
            assert f"eval_frameworks.yaml::{case}[{name}] PASSED" in done.stdout
    assert not (tmp_path / "real_tools.log").exists()  # no framework ran a real tool
    report = json.loads((tmp_path / "r.json").read_text())
    calls = {
        c["case_id"]: [(t["name"], t["args"], t["result"]) for t in c["tool_calls"]]
        for c in report["cases"]
    }
    for name in names:
        assert calls[f"order_status[{name}]"] == [
            (
                "lookup_order",
                {"order_id": "A100"},
                "order A100: shipped on 2026-11-20, arrives 2026-11-25",
            )
        ]
    shipped = "order A100: shipped on 2026-11-20, arrives 2026-11-25"
    for name in (
        names
    ):  # the second turn's "it" is the first turn's order: each framework had the first turn
        assert calls[f"follow_up[{name}]"] == [("lookup_order", {"order_id": "A100"}, shipped)] * 2
    assert set(report["agents"]) == set(names)


def test_k_selects_one_framework(tmp_path: Path) -> None:
    done = _run(tmp_path, "-k", "pydantic_ai")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 passed, 6 deselected" in done.stdout
