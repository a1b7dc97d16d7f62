"""``--junitxml``: an infrastructure error is an ``<error>``, not a ``<failure>``.

An infrastructure error (the LLM traffic failed, not the agent) is an ``<error>``, as pytest writes
for a setup error. A plugin object on the controller, registered with ``--junitxml``.
"""

from __future__ import annotations

import pytest

from pytest_agent_eval.compat import junit_failure_as_error


class InfrastructureErrors:
    """Rewrites the junit element of each infrastructure error, after pytest's junitxml wrote it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.failed and getattr(report, "agent_eval_infra", False):
            junit_failure_as_error(self.config, report)
