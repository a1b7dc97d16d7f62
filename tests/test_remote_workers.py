"""xdist workers on other machines (SPEC §18): nothing the controller writes to its own disk is assumed on a worker,
cassettes recorded on a worker come back to the controller, and a budget kept per machine is warned about.

Other machines are simulated: a worker handed a path that does not exist where it runs, and (``remote_workers``)
execnet socket servers on loopback, each in a working directory of its own holding a copy of the project, as a
checkout on another machine would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_support import USAGE_AGENT

MISSING_CRASH_DIR = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    node.workerinput["agent_eval_crash_dir"] = "/nonexistent/agent-eval-workers-elsewhere"
"""


def test_a_worker_without_the_controllers_crash_folder_runs_its_cases(pytester: pytest.Pytester) -> None:
    """The controller's crash-log folder does not exist where a remote worker runs: the worker runs without the
    crash triage, it does not fail (it did: FileNotFoundError in pytest_configure, and the controller hung)."""
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makeconftest(MISSING_CRASH_DIR)
    cases = "".join(f"  - {{id: ok{n}, input: hi, context: {{say: hello}}}}\n" for n in range(4))
    pytester.makefile(".yaml", eval_w=f"agent: usage_agent:run\ncases:\n{cases}")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "1", "--agent-eval-concurrency", "2", "--agent-eval-report=r.json", timeout=90
    )
    result.assert_outcomes(passed=4)
    report = json.loads((pytester.path / "r.json").read_text())
    assert sorted(c["nodeid"] for c in report["cases"]) == [f"eval_w.yaml::ok{n}" for n in range(4)]
    assert not list(Path("/nonexistent").glob("*"))
