"""Every trial an OpenTelemetry trace, written as OTLP JSON lines and/or sent over OTLP/HTTP.

SPEC §23: ``--agent-eval-traces PATH``, ``--agent-eval-otlp [URL]``, ``--agent-eval-trace-url
TEMPLATE``.

The engine (``pytest_agent_eval.traces``, the OpenTelemetry SDK of the ``otel`` extra) loads only
when an option asks for it, or when a case checks spans (the runner loads it then, for that case's
spans alone). The controller of an xdist run empties the file and hands its workers the run id; each
process that runs cases has its own tracing, and tells the controller how many spans it could not
send (the summary counts them).
"""

from __future__ import annotations

import os
import sys
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    from pytest_agent_eval.traces.engine import Tracing

_RUN_ID = "agent_eval_run_id"
"""The ``workerinput`` key with which the controller tells its workers the run id."""
_OUTPUT = "agent_eval_traces"
"""The ``workeroutput`` key with which a worker tells the controller ``[dropped, why]``."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--agent-eval-traces",
        dest="agent_eval_traces",
        metavar="PATH",
        default=None,
        help="write every trial's trace to PATH as OTLP JSON, one ExportTraceServiceRequest a "
        "line (SPEC §23)",
    )
    group.addoption(
        "--agent-eval-otlp",
        dest="agent_eval_otlp",
        metavar="URL",
        nargs="?",
        const="",
        default=None,
        help="send every trial's trace over OTLP/HTTP to URL (the traces endpoint; default: "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces)",
    )
    group.addoption(
        "--agent-eval-trace-url",
        dest="agent_eval_trace_url",
        metavar="TEMPLATE",
        default=None,
        help="link each case's trace in the HTML report: a URL with {trace_id} (e.g. a Phoenix or "
        "Jaeger page)",
    )


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("agent_eval_traces", None)
    endpoint = config.getoption("agent_eval_otlp", None)
    template = config.getoption("agent_eval_trace_url", None)
    if template is not None and "{trace_id}" not in template:
        raise pytest.UsageError(
            f"--agent-eval-trace-url {template!r}: put {{trace_id}} where the trace id goes"
        )
    if path is None and endpoint is None:
        return
    import importlib.util

    if importlib.util.find_spec("opentelemetry.sdk") is None or (
        endpoint is not None
        and importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None
    ):
        raise pytest.UsageError(
            "--agent-eval-traces / --agent-eval-otlp need the OpenTelemetry SDK and exporter: "
            "pip install 'pytest-agent-evalset[otel]'"
        )
    config.pluginmanager.register(Traces(config, path, endpoint), "agent_eval_traces_run")


def pytest_unconfigure(config: pytest.Config) -> None:
    engine = sys.modules.get("pytest_agent_eval.traces.engine")
    if engine is not None:  # a case checked spans: the capture-only tracing ends with the run
        engine.close_capture_only()


class Traces:
    """The run's trace options, on every process; the tracing itself is made where cases run."""

    def __init__(self, config: pytest.Config, path: str | None, endpoint: str | None) -> None:
        self.config = config
        worker = compat.worker_input(config)
        memory = config.pluginmanager.get_plugin("agent_eval_run_memory")
        own = getattr(memory, "run_id", None)  # the run store's id of the run: one id everywhere
        self.run_id = str((worker or {}).get(_RUN_ID) or own or uuid.uuid4().hex)
        self.path = Path(config.invocation_params.dir, path) if path is not None else None
        if (
            self.path is not None and worker is None
        ):  # the controller (or the only process) starts the file
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_bytes(b"")
            except OSError as exc:
                raise pytest.UsageError(
                    f"--agent-eval-traces {path}: cannot write it ({exc.strerror})"
                ) from None
        self.endpoint = endpoint
        self._tracing: Tracing | None = None
        self.dropped = 0
        self.why: str | None = None

    @property
    def tracing(self) -> Tracing:
        """The process's tracing, made at its first case.

        An xdist controller, which runs none, makes none.
        """
        if self._tracing is None:
            from pytest_agent_eval.report.run_info import git_commit
            from pytest_agent_eval.traces.engine import TraceOptions, Tracing, otlp_endpoint

            self._tracing = Tracing(
                TraceOptions(
                    path=self.path,
                    endpoint=None
                    if self.endpoint is None
                    else otlp_endpoint(self.endpoint or None, os.environ),
                    run_id=self.run_id,
                    commit=git_commit(self.config.rootpath),
                )
            )
        return self._tracing

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_RUN_ID] = self.run_id

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self._tracing is not None:
            self._tracing.close()  # what is left is sent (or counted as dropped)
            counted = self._tracing.counted
            if counted is not None and counted.dropped:
                self.dropped += counted.dropped
                self.why = self.why or counted.why
        output = compat.worker_output(self.config)
        if output is not None:
            output[_OUTPUT] = [self.dropped, self.why]
        elif self.dropped:
            from pytest_agent_eval.traces.engine import TraceWarning

            warnings.warn(
                TraceWarning(f"{self.why}; the run went on: {self.dropped} spans dropped"),
                stacklevel=1,
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        told = compat.node_output(node).get(_OUTPUT)
        if isinstance(told, list) and len(told) == 2 and isinstance(told[0], int):
            self.dropped += told[0]
            self.why = self.why or (str(told[1]) if told[1] else None)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if compat.worker_output(self.config) is not None:
            return
        if self.path is not None:
            terminalreporter.write_line(
                f"agent eval traces: {self.path} (OTLP JSON lines, run {self.run_id})"
            )
        if self.endpoint is not None:
            sent = "sent" if not self.dropped else f"{self.dropped} spans dropped ({self.why})"
            terminalreporter.write_line(f"agent eval traces over OTLP: {sent}")
