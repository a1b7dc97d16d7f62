"""The report formats, each a plugin object registered on the controller only.

Not on xdist workers, as pytest's own junitxml is; all of them read the records that ``Records``
gathers from the test reports.

A format is one module (its plugin object) and one registration line, :func:`add_format`, in the
``pytest_agent_eval_register_formats`` hook: here for the built-in ones (:func:`builtin_formats`),
in a ``conftest.py`` or plugin for anyone else's (see docs/extending.md), as checks, dialects and
adapters are.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from pytest_agent_eval.compat import is_worker
from pytest_agent_eval.core.files import is_eval_file
from pytest_agent_eval.report.collector import COLLECTOR, Records
from pytest_agent_eval.report.limits import Thresholds
from pytest_agent_eval.report.options import (
    BASELINE_LOADER,
    REPORT_OPTIONS,
    ReportOptions,
    rootdir_moved_by,
)
from pytest_agent_eval.report.summary import Summary

MakeFormat = Callable[[pytest.Config, Records], object]
"""``make(config, records) -> plugin object``: a format from the run's options and its records.

Read the records when the session finishes: ``records.records``, one ``CaseRecord`` per eval item.
"""


def add_format(
    config: pytest.Config, name: str, make: MakeFormat, option: str | None = None
) -> None:
    """Register the report format ``name``: the plugin object ``make(config, records)``.

    On the xdist controller (or the only process) and only when ``option`` (an option's ``dest``;
    ``None``: always) is set.

    Call it from ``pytest_agent_eval_register_formats`` (or ``pytest_configure``). Workers register
    nothing: their reports, each with its case's record, reach the controller, so a format reads the
    same with and without ``-n``.
    """
    if is_worker(config) or (option is not None and not config.getoption(option, None)):
        return
    config.pluginmanager.register(make(config, run_records(config)), name)
    config.stash.setdefault(_REGISTERED, []).append(name)


_REGISTERED = pytest.StashKey[list[str]]()


def withdraw(config: pytest.Config) -> None:
    """Unregister every format and the summary: the session turned out to be no run.

    For example a usage error found at collection; the reports of the last real run stay as they
    are.
    """
    for name in [*config.stash.get(_REGISTERED, []), "agent_eval_summary", "agent_eval_thresholds"]:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    config.stash[_REGISTERED] = []


def run_records(config: pytest.Config) -> Records:
    """The run's records, gathered by the ``Records`` plugin object.

    The object is registered with the first format.
    """
    collector = config.stash.get(COLLECTOR, None)
    if collector is None:
        collector = config.stash[COLLECTOR] = Records(
            partial(_is_eval_file, config), partial(_case_lines, config)
        )
        config.pluginmanager.register(collector, "agent_eval_records")
    return collector


def _is_eval_file(config: pytest.Config, file: str) -> bool:
    """Whether ``file`` was collected as an eval file.

    ``file`` is a node id's path, relative to the rootdir.
    """
    path = config.rootpath / file
    explicit = any(
        (config.invocation_params.dir / arg.split("::")[0]).resolve() == path for arg in config.args
    )
    return is_eval_file(path, tuple(config.getini("agent_eval_files")), explicit)


CASE_LINES = pytest.StashKey[Callable[[str], dict[str, int]]]()
"""Set by the plugin layer: ``case_lines(file)``, the line of each case id of an eval file.

``file`` is relative to the rootdir; it is read again on the controller for the cases an xdist
worker never started; empty when it cannot be read (a line is then not told, never made up).
"""


def _case_lines(config: pytest.Config, file: str) -> dict[str, int]:
    """The lines of ``file``'s cases through the plugin's reader (:data:`CASE_LINES`).

    None without a reader.
    """
    read = config.stash.get(CASE_LINES, None)
    return read(file) if read is not None else {}


def configure(config: pytest.Config) -> None:
    """Register the record collector, the terminal summary and the formats asked for.

    On the controller; none under ``--collect-only`` (an IDE's background discovery): it writes no
    report and prints no eval summary, and the last real run's reports stay as they are (SPEC §22).
    """
    if is_worker(config) or config.option.collectonly:
        return
    for flag, value in rootdir_moved_by(config):
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"pytest chose the rootdir {config.rootpath} with {value} ({flag}) "
                f"as a test path; write {flag}={value}: "
                "pytest reads a plugin's options after it chooses the rootdir, "
                "and node ids (which a baseline is compared by) and the ini file read depend on it"
            ),
            stacklevel=2,
        )
    config.stash[REPORT_OPTIONS] = ReportOptions.from_config(config)
    collector = run_records(config)
    config.pluginmanager.register(Summary(collector, config.get_verbosity), "agent_eval_summary")
    options = _options(config)
    thresholds = Thresholds(options.min_pass_rate, options.max_cost, options.max_p95_latency_s)
    if thresholds:  # its exit status is decided after the baseline gate's (a hook wrapper)
        from pytest_agent_eval.report.thresholds import SuiteThresholds

        config.pluginmanager.register(
            SuiteThresholds(thresholds, collector), "agent_eval_thresholds"
        )
    config.hook.pytest_agent_eval_register_formats(config=config)


def builtin_formats(config: pytest.Config) -> None:
    """The built-in report formats, each registered when its option is set."""
    add_format(config, "agent_eval_json_report", _json_report, option="agent_eval_report")
    add_format(config, "agent_eval_junit_errors", _junit_errors, option="xmlpath")
    add_format(config, "agent_eval_baseline", _baseline, option="agent_eval_baseline")
    add_format(config, "agent_eval_markdown", _markdown, option="agent_eval_markdown")
    add_format(config, "agent_eval_html", _html, option="agent_eval_html")


def _options(config: pytest.Config) -> ReportOptions:
    """The run's report options, read once when the reports are configured."""
    return config.stash[REPORT_OPTIONS]


def _json_report(config: pytest.Config, records: Records) -> object:
    from pytest_agent_eval.report.json_report import JsonReport

    path = _options(config).json
    assert path is not None  # registered only with the option
    return JsonReport(config, path, records)


def _junit_errors(config: pytest.Config, records: Records) -> object:
    from pytest_agent_eval.report.junit import InfrastructureErrors

    return InfrastructureErrors(config)


def _markdown(config: pytest.Config, records: Records) -> object:
    from pytest_agent_eval.report.markdown import MarkdownReport

    path = _options(config).markdown
    assert path is not None  # registered only with the option
    return MarkdownReport(config, path, records)


def _html(config: pytest.Config, records: Records) -> object:
    from pytest_agent_eval.report.html import HtmlReport

    path = _options(config).html
    assert path is not None  # registered only with the option
    return HtmlReport(config, path, records)


def _baseline(config: pytest.Config, records: Records) -> object:
    from pytest_agent_eval.report.compare import BaselineCompare

    options = _options(config)
    assert options.baseline is not None  # registered only with the option
    return BaselineCompare(
        options.baseline,
        records,
        tolerance=options.tolerance,
        significance=options.significance,
        fail_on_regression=options.fail_on_regression,
        gate=options.gate,
        load=config.stash.get(BASELINE_LOADER, None),
    )
