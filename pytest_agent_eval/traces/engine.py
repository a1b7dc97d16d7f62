"""The run's tracing (SPEC §23): one trace per trial, the agent's own spans caught in it, sent out.

Loaded only when a trace option asks for it, or a case's ``expect:`` reads spans (the OpenTelemetry
SDK is the ``otel`` extra). The floor: imports ``core`` and ``traffic`` only
(tests/test_architecture.py).

* The TracerProvider: one the user set keeps working, the run's processor added to it; without one
  the run sets its own, for the run only (``close`` gives the global back).
* A trial: ``Tracing.trial(...)`` starts the root span ``invoke_agent <agent>`` and makes it current
  around the agent call (``activate``): asyncio tasks and the runner's threads copy the context, so
  the agent's spans are children of their own trial's root under any concurrency. The root's end
  sends the trace's spans out: one ``ExportTraceServiceRequest`` a line to ``--agent-eval-traces``,
  OTLP/HTTP to ``--agent-eval-otlp``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from pytest_agent_eval.traces import conventions as cv
from pytest_agent_eval.traces.tree import Span

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import CheckResult, ToolCall
    from pytest_agent_eval.traffic.scope import SeenCall


class TraceWarning(UserWarning):
    """The traces could not be sent.

    An unreachable OTLP endpoint, a file that cannot be written.
    """


@dataclass
class TraceOptions:
    """What the run does with its traces."""

    path: Path | None = None
    """``--agent-eval-traces``: OTLP JSON lines, appended.

    The controller empties the file at the start.
    """
    endpoint: str | None = None
    """``--agent-eval-otlp``: the OTLP/HTTP traces endpoint."""
    run_id: str = ""
    commit: str | None = None


def otlp_endpoint(
    given: str | None, environ: dict[str, str] | os._Environ[str] = os.environ
) -> str:
    """The traces endpoint: the option's, else the environment's, else the local collector.

    The option's URL as given; else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as given; else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` with ``/v1/traces``; else OpenTelemetry's default, the local
    collector.
    """
    if given:
        return given
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as one ``ExportTraceServiceRequest`` in OTLP's JSON encoding.

    Protobuf's JSON mapping with the trace and span ids in hex (OTLP/JSON's one difference) and
    enums as integers.
    """
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    data: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        if link.get(key):
                            link[key] = base64.b64decode(link[key]).hex()
    return data


class JsonLines(SpanExporter):
    """The ``--agent-eval-traces`` exporter: a trial's spans as one line of the file.

    The line is appended with one ``write`` (xdist's workers share the file).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        line = (json.dumps(otlp_json(spans), separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Counted(SpanExporter):
    """The OTLP exporter, counting the spans it could not send.

    After the first failure the rest are dropped at once (counted), so that an unreachable endpoint
    does not hold the run up; ``why`` says what happened, for the run's one warning (the plugin's,
    at the end).
    """

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self.handed = 0
        """Spans handed to the batch processor for this exporter (the collector counts them)."""
        self.sent = 0
        self.why: str | None = None

    @property
    def dropped(self) -> int:
        """Spans not sent: failed, dropped after a failure, or still queued when the run ended."""
        return max(0, self.handed - self.sent)

    def settle(self) -> None:
        """At the run's end, say why spans were left unsent when no failure was seen.

        Spans left unsent without a failure seen: the endpoint did not answer in time.
        """
        if self.dropped and self.why is None:
            self.why = (
                f"--agent-eval-otlp: spans not sent to {self.endpoint} (it did not answer in time)"
            )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.why is None:
            try:
                result = self.inner.export(spans)
            except Exception as exc:  # the exporter's own error: a failure
                result, error = SpanExportResult.FAILURE, f": {type(exc).__name__}"
            else:
                error = ""
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
                return result
            self.why = (
                f"--agent-eval-otlp: spans not sent to {self.endpoint} "
                f"(unreachable or refused{error})"
            )
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.inner.shutdown()


@dataclass
class TrialTrace:
    """One trial's trace: its root span, the spans ended in it so far."""

    root: Any
    trace_id: str
    spans: list[ReadableSpan] = field(default_factory=list)
    token: object | None = None


class Collector(SpanProcessor):
    """Keeps the spans of live trials' traces; at a root's end sends the trace to the exporters."""

    def __init__(self, exporters: list[SpanProcessor], counted: Counted | None = None) -> None:
        self.exporters = exporters
        self.counted = counted
        self.live: dict[int, TrialTrace] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        with self._lock:
            trial = self.live.get(context.trace_id)
            if trial is None:
                return
            trial.spans.append(span)
            done = span.parent is None and context.span_id == trial.root.get_span_context().span_id
            if done:
                del self.live[context.trace_id]
        if done:
            if self.counted is not None:
                with self._lock:
                    self.counted.handed += len(trial.spans)
            for exporter in self.exporters:
                for one in trial.spans:
                    exporter.on_end(one)

    def shutdown(self) -> None:
        for exporter in self.exporters:
            exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(exporter.force_flush(timeout_millis) for exporter in self.exporters)


class Tracing:
    """The run's tracing: the provider (the user's or the run's), the collector, the exporters."""

    def __init__(self, options: TraceOptions) -> None:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        self.options = options
        self.counted: Counted | None = None
        exporters: list[SpanProcessor] = []
        if options.path is not None:
            exporters.append(SimpleSpanProcessor(JsonLines(options.path)))
        if options.endpoint is not None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.counted = Counted(
                OTLPSpanExporter(endpoint=options.endpoint, timeout=5), options.endpoint
            )
            exporters.append(BatchSpanProcessor(self.counted))
        self.collector = Collector(exporters, self.counted)
        resource = {
            cv.SERVICE_NAME: cv.SERVICE,
            cv.RUN_ID: options.run_id,
            cv.OI_PROJECT_NAME: cv.SERVICE,
        }
        if options.commit:
            resource[cv.VCS_REVISION] = options.commit
        self.resource = Resource.create(resource)
        self.own: TracerProvider | None = None
        self._provider: Any = None
        self._lock = threading.Lock()

    def provider(self) -> Any:
        """The provider the trials' spans go through, found (or set) at the first trial.

        A user's provider set later than that is theirs alone (OpenTelemetry lets the global be set
        once).
        """
        with self._lock:
            if self._provider is None:
                current = trace.get_tracer_provider()
                if hasattr(
                    current, "add_span_processor"
                ):  # the user's SDK provider: theirs keeps working
                    current.add_span_processor(self.collector)
                    self._provider = current
                else:
                    self.own = TracerProvider(resource=self.resource)
                    self.own.add_span_processor(self.collector)
                    if (
                        type(current).__name__ == "ProxyTracerProvider"
                    ):  # none set: the run's, for the run only
                        trace.set_tracer_provider(self.own)
                    else:  # another kind the run cannot add to: its own spans only
                        warnings.warn(
                            TraceWarning(
                                f"the TracerProvider set ({type(current).__name__}) takes no "
                                "span processor: the agent's own spans are not caught, the "
                                "trials' are sent"
                            ),
                            stacklevel=1,
                        )
                    self._provider = self.own
            return self._provider

    @property
    def dropped(self) -> int:
        return self.counted.dropped if self.counted is not None else 0

    def start(self, agent: str, case_id: str, case_file: str, trial: int, query: str) -> TrialTrace:
        """Start a trial's root span, not yet current.

        ``activate`` makes it current around the agent call.
        """
        tracer = self.provider().get_tracer("pytest_agent_eval")
        attributes: dict[str, Any] = {
            cv.OPERATION_NAME: cv.OP_INVOKE_AGENT,
            cv.AGENT_NAME: agent,
            cv.CASE_ID: case_id,
            cv.CASE_FILE: case_file,
            cv.TRIAL: trial,
            cv.RUN_ID: self.options.run_id,
            cv.ORIGIN: cv.SERVICE,
            cv.INPUT_MESSAGES: _messages("user", query),
        }
        root = tracer.start_span(
            f"{cv.OP_INVOKE_AGENT} {agent}",
            context=otel_context.Context(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        context = root.get_span_context()
        record = TrialTrace(root, format(context.trace_id, "032x"))
        with self.collector._lock:
            self.collector.live[context.trace_id] = record
        return record

    @contextlib.contextmanager
    def activate(self, record: TrialTrace) -> Iterator[None]:
        """The trial's root as the current span while the block runs (the agent call)."""
        token = otel_context.attach(trace.set_span_in_context(record.root))
        try:
            yield
        finally:
            otel_context.detach(token)

    def add_calls(
        self, record: TrialTrace, calls: Sequence[SeenCall], tool_calls: Sequence[ToolCall]
    ) -> None:
        """Add the trial's chat spans and tool spans to its trace.

        The chat spans are the LLM requests the traffic hook saw; the tool spans, the calls
        recorded.
        """
        tracer = self.provider().get_tracer("pytest_agent_eval")
        parent = trace.set_span_in_context(record.root)
        for call in calls:
            model = call.model or "unknown"
            attributes: dict[str, Any] = {cv.OPERATION_NAME: cv.OP_CHAT, cv.ORIGIN: cv.SERVICE}
            if call.model:
                attributes[cv.REQUEST_MODEL] = call.model
                attributes[cv.RESPONSE_MODEL] = call.model
            if call.response_id:
                attributes[cv.RESPONSE_ID] = call.response_id
            if call.provider:
                attributes[cv.PROVIDER_NAME] = call.provider
            if call.usage is not None and call.usage.unreadable is None:
                attributes[cv.USAGE_INPUT_TOKENS] = call.usage.input_tokens
                attributes[cv.USAGE_OUTPUT_TOKENS] = call.usage.output_tokens
                attributes[cv.USAGE_CACHE_READ_INPUT_TOKENS] = call.usage.cache_read_tokens
                attributes[cv.USAGE_CACHE_CREATION_INPUT_TOKENS] = call.usage.cache_write_tokens
            if call.cost is not None:
                attributes[cv.COST] = call.cost
            span = tracer.start_span(
                f"{cv.OP_CHAT} {model}",
                context=parent,
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=call.start_ns,
            )
            if call.error:
                span.set_status(Status(StatusCode.ERROR, call.error))
                span.set_attribute(cv.ERROR_TYPE, call.error)
            span.end(end_time=max(call.end_ns, call.start_ns))
        now = time.time_ns()
        for tool in tool_calls:
            attributes = {
                cv.OPERATION_NAME: cv.OP_EXECUTE_TOOL,
                cv.TOOL_NAME: tool.name,
                cv.TOOL_CALL_ARGUMENTS: _json(tool.args),
                cv.ORIGIN: cv.SERVICE,
            }
            if tool.server is not None:  # an MCP tool
                attributes[cv.MCP_SERVER] = tool.server
                attributes[cv.MCP_METHOD_NAME] = cv.MCP_TOOLS_CALL
            if tool.mocked is not None:
                attributes[cv.TOOL_MOCKED] = tool.mocked
            if tool.result is not None:
                attributes[cv.TOOL_CALL_RESULT] = _json(tool.result)
            span = tracer.start_span(
                f"{cv.OP_EXECUTE_TOOL} {tool.name}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=tool.start_ns or now,
            )
            if tool.error is not None:
                span.set_status(Status(StatusCode.ERROR, tool.error))
                span.set_attribute(cv.ERROR_TYPE, tool.error)
            span.end(end_time=max(tool.end_ns or now, tool.start_ns or now))

    def spans(self, record: TrialTrace) -> list[Span]:
        """The trial's spans so far, as the record keeps them.

        Its root is included, as still running.
        """
        with self.collector._lock:
            ended = list(record.spans)
        return as_tree([record.root, *ended])

    def finish(
        self, record: TrialTrace, output: str, error: str | None, checks: Sequence[CheckResult]
    ) -> None:
        """End the trial's trace: the checks' verdicts on its root, the root ended, the trace sent.

        Each check's verdict is a ``gen_ai.evaluation.result`` event; ending the root sends the
        trace.
        """
        root = record.root
        root.set_attribute(cv.OUTPUT_MESSAGES, _messages("assistant", output))
        for check in checks:
            attributes: dict[str, Any] = {
                cv.EVALUATION_NAME: check.name,
                cv.EVALUATION_SCORE_LABEL: "error"
                if check.error
                else "pass"
                if check.passed
                else "fail",
            }
            if check.scored and not check.error:
                attributes[cv.EVALUATION_SCORE_VALUE] = float(check.score)
            if check.message:
                attributes[cv.EVALUATION_EXPLANATION] = check.message
            root.add_event(cv.EVALUATION_EVENT, attributes)
        if error:
            root.set_status(Status(StatusCode.ERROR, error))
        root.end()

    def close(self) -> None:
        """Send what is left; the run's own provider shut down and the global given back."""
        self.collector.force_flush()
        self.collector.shutdown()
        if self.counted is not None:
            self.counted.settle()
        if self.own is not None:
            self.own.shutdown()
            if trace.get_tracer_provider() is self.own:
                from pytest_agent_eval import compat

                compat.unset_tracer_provider()


def _messages(role: str, text: str) -> str:
    """One text as GenAI's message list, in JSON.

    The list of ``gen_ai.input.messages`` / ``gen_ai.output.messages``.
    """
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)


_KINDS = {kind: kind.name.lower() for kind in SpanKind}
_STATUS = {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}


def as_tree(spans: Sequence[Any]) -> list[Span]:
    """OpenTelemetry spans (ended or still running) as the record's list of spans.

    In start order, ``parent`` an index.
    """
    ordered = sorted(spans, key=lambda s: (s.start_time or 0, s.context.span_id))
    index = {s.context.span_id: n for n, s in enumerate(ordered)}
    out: list[Span] = []
    now = time.time_ns()
    for span in ordered:
        start = span.start_time or now
        end = span.end_time or now
        parent = span.parent.span_id if span.parent is not None else None
        item: Span = {
            "name": span.name,
            "kind": _KINDS.get(span.kind, "internal"),
            "attributes": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in (span.attributes or {}).items()
            },
            "status": _STATUS.get(span.status.status_code, "unset"),
            "start": datetime.fromtimestamp(start / 1e9, timezone.utc).isoformat(
                timespec="microseconds"
            ),
            "duration_ms": round((end - start) / 1e6, 3),
            "parent": index.get(parent) if parent is not None else None,
        }
        if span.status.description:
            item["status_message"] = span.status.description
        out.append(item)
    return out


_CAPTURE: Tracing | None = None
_CAPTURE_LOCK = threading.Lock()


def capture_only() -> Tracing:
    """The process's tracing for span checks in a run without a trace option: nothing is sent.

    For cases that check spans.
    """
    global _CAPTURE
    with _CAPTURE_LOCK:
        if _CAPTURE is None:
            _CAPTURE = Tracing(TraceOptions())
        return _CAPTURE


def close_capture_only() -> None:
    """End the capture-only tracing at the run's end.

    The global provider is given back if this tracing set it.
    """
    global _CAPTURE
    with _CAPTURE_LOCK:
        if _CAPTURE is not None:
            _CAPTURE.close()
            _CAPTURE = None
