"""The report formats, each a plugin object registered on the controller only (not on xdist workers), as
pytest's own junitxml is; all of them read the records that ``Records`` gathers from the test reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agent_eval.report.collector import COLLECTOR, Records, is_worker
from pytest_agent_eval.report.summary import Summary
from pytest_agent_eval.report.thresholds import SuiteThresholds, Thresholds


def configure(config: pytest.Config) -> None:
    """Register the record collector and the terminal summary (and the formats asked for) on the controller."""
    if is_worker(config):
        return
    collector = Records()
    config.stash[COLLECTOR] = collector
    config.pluginmanager.register(collector, "agent_eval_records")
    config.pluginmanager.register(Summary(collector, config.get_verbosity), "agent_eval_summary")
    thresholds = Thresholds.from_config(config)
    if thresholds:  # registered before the baseline comparison: its exit status is decided first, this one last
        config.pluginmanager.register(SuiteThresholds(thresholds, collector), "agent_eval_thresholds")
    path = config.getoption("agent_eval_report", None)
    if path:
        from pytest_agent_eval.report.json_report import JsonReport

        config.pluginmanager.register(JsonReport(config, Path(path), collector), "agent_eval_json_report")
    baseline = config.getoption("agent_eval_baseline", None)
    if baseline:
        from pytest_agent_eval.report.compare import BaselineCompare

        plugin = BaselineCompare(
            Path(baseline),
            collector,
            tolerance=config.getoption("agent_eval_tolerance"),
            significance=config.getoption("agent_eval_significance"),
            fail_on_regression=config.getoption("agent_eval_fail_on_regression"),
            gate=config.getoption("agent_eval_gate"),
        )
        config.pluginmanager.register(plugin, "agent_eval_baseline")
    elif config.getoption("agent_eval_gate", None) or config.getoption("agent_eval_fail_on_regression", False):
        raise pytest.UsageError("--agent-eval-gate and --agent-eval-fail-on-regression need --agent-eval-baseline PATH")
