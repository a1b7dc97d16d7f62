"""Ctrl-C while xdist starts its workers (issue 27, item 20).

Reproduced by sending SIGINT to the controller alone (``kill -INT <pid>``, as a CI runner or a
supervisor does; a terminal's Ctrl-C reaches the workers too) 0.05 to 0.2 s after ``created: N/N
workers``, under ``--agent-eval-concurrency 4``: the controller ends its session and removes the
directory it shares with the workers (``plugin/crashes.py``), while a worker still configuring opens
its log there — an INTERNALERROR (``FileNotFoundError: …/agent-eval-workers-…/gw0.log``) on stderr.
The test makes that order certain: the controller's directory is gone before the worker configures.
"""

from __future__ import annotations

import pytest

CONFTEST = """
import shutil

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    # what an interrupted controller does before this worker configures: its shared \
directory is removed
    shutil.rmtree(node.workerinput["agent_eval_crash_dir"], ignore_errors=True)
"""

AGENT = """
def agent(query):
    return "answer to " + query
"""

EVALS = """
agent: interrupt_agents:agent
cases:
  - id: one
    input: first
    expect: {contains: [answer to first]}
  - id: two
    input: second
    expect: {contains: [answer to second]}
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_item20_a_worker_configuring_after_the_controller_ended_is_no_internal_error(
    pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(interrupt_agents=AGENT)
    pytester.makefile(".yaml", eval_interrupt=EVALS)
    pytester.makeini("[pytest]\n")
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-n", workers, "--agent-eval-concurrency", "4"
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)
