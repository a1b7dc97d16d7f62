"""Support for the dialect tests: a table-driven agent, and the original projects' real files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

SEED_DATA = Path(
    os.environ.get("AGENT_EVAL_SEED_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "seed-data"
)
"""Real eval files of the projects this plugin serves (outside the repository, or at
$AGENT_EVAL_SEED_DATA; tests skip without them).
"""

AGENT = '''
import json, pathlib, time

ANSWERS = json.loads(pathlib.Path(__file__).with_name("answers.json").read_text())

def dispatch_tool(name, args):
    return "real result of " + name

def run(query, context=None):
    """Looks the query up: [output, tools] or {output, tools, sleep, raise, dispatch}."""
    found = ANSWERS.get(query, ["", []])
    spec = found if isinstance(found, dict) else {"output": found[0], "tools": found[1]}
    if spec.get("raise"):
        raise RuntimeError(spec["raise"])
    time.sleep(spec.get("sleep", 0))
    if spec.get("dispatch"):  # call the tools through dispatch_tool (what tool mocks patch) and \
say what came back
        results = [dispatch_tool(t, {"q": query}) for t in spec["tools"]]
        return {"output": " | ".join(str(r) for r in results)}
    return {"output": spec.get("output", ""), "tools_called": spec.get("tools", [])}
'''


def answering(pytester: pytest.Pytester, answers: dict[str, Any]) -> pytest.Pytester:
    """Write ``table_agent`` (``--agent table_agent:run``), an agent answering from ``answers``."""
    pytester.makepyfile(table_agent=AGENT)
    (pytester.path / "answers.json").write_text(json.dumps(answers))
    pytester.syspathinsert()
    return pytester


def run_evals(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest on the directory with the table agent; no INTERNALERROR whatever happens."""
    result = pytester.runpytest("--agent", "table_agent:run", "-p", "no:cacheprovider", *args)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    return result


def seed_file(relative: str) -> Path:
    """A file of the original projects, or a skip when they are not next to the repository."""
    path = SEED_DATA / relative
    if not path.is_file():
        pytest.skip(f"seed data not available: {path}")
    return path
