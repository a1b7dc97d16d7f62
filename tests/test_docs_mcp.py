"""The "Tools from MCP servers" page (docs/guide/mcp.md), run as written.

Its agent and its eval file, with a stand-in server, against the loopback LLM.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("openai")

from openai_server import ChatServer

PAGE = Path(__file__).parent.parent / "docs" / "guide" / "mcp.md"


def _files() -> dict[str, str]:
    """The page's fenced blocks whose first line names their file (``# weather_agent.py``)."""
    found = {}
    for block in re.findall(r"```\w+\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S):
        first, _, _ = block.partition("\n")
        if re.fullmatch(r"# [\w.]+\.(py|yaml)", first):
            found[first[2:]] = block
    return found


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    return "get_forecast", {"city": prompt.rsplit(" ", 1)[-1].strip("?")}


def test_the_pages_stand_in_example_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files()
    assert set(files) == {"eval_weather.yaml", "weather_agent.py"}
    for name, text in files.items():
        (pytester.path / name).write_text(text, encoding="utf-8")
    pytester.syspathinsert()
    with ChatServer(route) as chat:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("OPENAI_BASE_URL", chat.base_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
