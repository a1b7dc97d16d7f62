"""``agent-eval capture``: make one trace of a trace export a native case (SPEC §23).

``agent-eval capture TRACE.json [--trace-id ID] [-o FILE]`` makes one trace of an export a native
case, so that a production failure becomes a regression test in one command.

It reads OTLP JSON (an ``ExportTraceServiceRequest``, or one a line: this plugin's
``--agent-eval-traces``, an OpenTelemetry Collector's file exporter), Phoenix's span list (``GET
/v1/projects/{project}/spans``: ``{"data": […]}``) and Jaeger's JSON (``{"data": [{"traceID",
"spans": […]}]}``). The case: the first user message as ``input``, ``tool_mocks`` from the recorded
tool results, ``tool_sequence`` with the recorded arguments, the final answer as ``reference``.
Plain data: nothing of OpenTelemetry is imported.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pytest_agent_eval.traces import conventions as cv
from pytest_agent_eval.traces.tree import Span, tool_call_of, tool_server_of


class CaptureError(ValueError):
    """The trace file cannot be read as a trace export, or holds no such trace.

    The message says what is wrong.
    """


@dataclass
class Found:
    """One span of an export, read from whichever format it came in."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: float
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "unset"
    status_message: str = ""

    def as_span(self) -> Span:
        return {
            "name": self.name,
            "attributes": self.attributes,
            "status": self.status,
            "status_message": self.status_message,
        }


def read_export(text: str, where: str) -> list[Found]:
    """Every span of a trace export's ``text`` (``where`` names the file in errors)."""
    documents: list[Any] = []
    try:
        documents.append(json.loads(text))
    except json.JSONDecodeError as whole:
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    documents.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    if n == 1:
                        raise CaptureError(f"{where}: not JSON ({whole})") from None
                    raise CaptureError(f"{where}:{n}: not JSON ({exc.msg})") from None
    spans: list[Found] = []
    for n, document in enumerate(documents, 1):
        at = where if len(documents) == 1 else f"{where}:{n}"
        spans += _document(document, at)
    if not spans:
        raise CaptureError(
            f"{where}: no spans in it (OTLP JSON, Phoenix's or Jaeger's span export expected)"
        )
    return spans


def _document(document: Any, at: str) -> list[Found]:
    if isinstance(document, dict) and "resourceSpans" in document:
        return _otlp(document, at)
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        data = document["data"]
        if all(isinstance(d, dict) and "spans" in d for d in data):
            return [s for d in data for s in _jaeger(d, at)]
        return [_phoenix(s, f"{at}: data[{n}]") for n, s in enumerate(data)]
    if isinstance(document, list):
        return [_phoenix(s, f"{at}: [{n}]") for n, s in enumerate(document)]
    raise CaptureError(
        f"{at}: not a trace export: OTLP JSON has `resourceSpans`, "
        "Phoenix's span list and Jaeger's JSON `data`"
    )


def _id(value: Any, size: int, at: str) -> str:
    """A trace or span id in hex: OTLP/JSON writes hex, protobuf's JSON mapping base64."""
    if not isinstance(value, str) or not value:
        raise CaptureError(f"{at}: no id")
    if re.fullmatch(rf"[0-9a-fA-F]{{{size * 2}}}", value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise CaptureError(f"{at}: {value!r} is not a hex or base64 id") from None
    if len(raw) != size:
        raise CaptureError(f"{at}: {value!r} is not a {size}-byte id")
    return raw.hex()


def _any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (``{"stringValue": …}``) as plain data."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind == "arrayValue":
        return [_any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {
            kv.get("key"): _any_value(kv.get("value")) for kv in (inner or {}).get("values", [])
        }
    return inner


def _otlp(document: dict[str, Any], at: str) -> list[Found]:
    out = []
    for r, resource in enumerate(document.get("resourceSpans") or []):
        for s, scope in enumerate(
            resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or []
        ):
            for n, span in enumerate(scope.get("spans") or []):
                where = f"{at}: resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                if not isinstance(span, dict):
                    raise CaptureError(f"{where}: not an object")
                status = span.get("status") or {}
                code = status.get("code", 0)
                out.append(
                    Found(
                        trace_id=_id(span.get("traceId"), 16, f"{where}.traceId"),
                        span_id=_id(span.get("spanId"), 8, f"{where}.spanId"),
                        parent_id=_id(span["parentSpanId"], 8, where)
                        if span.get("parentSpanId")
                        else None,
                        name=str(span.get("name", "")),
                        start=float(span.get("startTimeUnixNano") or 0),
                        attributes={
                            a.get("key"): _any_value(a.get("value"))
                            for a in span.get("attributes") or []
                        },
                        status="error" if code in (2, "STATUS_CODE_ERROR") else "unset",
                        status_message=str(status.get("message") or ""),
                    )
                )
    return out


def _phoenix(span: Any, at: str) -> Found:
    if not isinstance(span, dict) or not isinstance(span.get("context"), dict):
        raise CaptureError(
            f"{at}: not a span of Phoenix's list (it has `context` with `trace_id`, `span_id`)"
        )
    attributes = dict(span.get("attributes") or {})
    if isinstance(
        span.get("span_kind"), str
    ):  # Phoenix keeps OpenInference's span kind beside the attributes
        attributes.setdefault(cv.OI_SPAN_KIND, span["span_kind"])
    return Found(
        trace_id=_id(span["context"].get("trace_id"), 16, f"{at}.context.trace_id"),
        span_id=_id(span["context"].get("span_id"), 8, f"{at}.context.span_id"),
        parent_id=_id(span["parent_id"], 8, f"{at}.parent_id") if span.get("parent_id") else None,
        name=str(span.get("name", "")),
        start=_sortable(span.get("start_time")),
        attributes=attributes,
        status="error" if span.get("status_code") == "ERROR" else "unset",
        status_message=str(span.get("status_message") or ""),
    )


def _jaeger(trace: dict[str, Any], at: str) -> list[Found]:
    out = []
    for n, span in enumerate(trace.get("spans") or []):
        where = f"{at}: spans[{n}]"
        tags = {t.get("key"): t.get("value") for t in span.get("tags") or []}
        parent = next(
            (
                r.get("spanID")
                for r in span.get("references") or []
                if r.get("refType") == "CHILD_OF"
            ),
            None,
        )
        out.append(
            Found(
                trace_id=_id(str(span.get("traceID", "")).rjust(32, "0"), 16, f"{where}.traceID"),
                span_id=_id(span.get("spanID"), 8, f"{where}.spanID"),
                parent_id=_id(parent, 8, where) if parent else None,
                name=str(span.get("operationName", "")),
                start=float(span.get("startTime") or 0),
                attributes=tags,
                status="error"
                if tags.get("otel.status_code") == "ERROR" or tags.get("error") is True
                else "unset",
                status_message=str(tags.get("otel.status_description") or ""),
            )
        )
    return out


def _sortable(value: Any) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return 0.0


def pick_trace(spans: list[Found], trace_id: str | None, where: str) -> list[Found]:
    """The spans of trace ``trace_id`` (the only one when ``None``), in start order."""
    ids = list(dict.fromkeys(s.trace_id for s in spans))
    if trace_id is None:
        if len(ids) > 1:
            shown = ", ".join(ids[:10]) + (f" (and {len(ids) - 10} more)" if len(ids) > 10 else "")
            raise CaptureError(
                f"{where} holds {len(ids)} traces: choose one with --trace-id ({shown})"
            )
        trace_id = ids[0]
    wanted = trace_id.lower()
    chosen = [s for s in spans if s.trace_id == wanted]
    if not chosen:
        raise CaptureError(f"{where} has no trace {trace_id} (it has {', '.join(ids[:10])})")
    return sorted(chosen, key=lambda s: s.start)


def _text_of_messages(value: Any, role: str, last: bool = False) -> str | None:
    """The text of the first (or ``last``) ``role`` message of GenAI's message list.

    The list is given as JSON or as data.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, list):
        return None
    texts = []
    for message in value:
        if isinstance(message, dict) and message.get("role") == role:
            parts = message.get("parts")
            text: str
            if isinstance(parts, list):
                text = "".join(
                    str(p.get("content", ""))
                    for p in parts
                    if isinstance(p, dict) and p.get("type") == "text"
                )
            else:
                content = message.get("content")
                text = content if isinstance(content, str) else ""
            if text:
                texts.append(text)
    return (texts[-1] if last else texts[0]) if texts else None


def _openinference_message(
    attributes: dict[str, Any], prefix: str, role: str, last: bool = False
) -> str | None:
    found = []
    for n in range(100):
        got_role = attributes.get(f"{prefix}.{n}.message.role")
        if got_role is None:
            break
        content = attributes.get(f"{prefix}.{n}.message.content")
        if got_role == role and isinstance(content, str) and content:
            found.append(content)
    return (found[-1] if last else found[0]) if found else None


def first_user_message(spans: list[Found]) -> str | None:
    for span in spans:  # start order: the root first
        text = _text_of_messages(
            span.attributes.get(cv.INPUT_MESSAGES), "user"
        ) or _openinference_message(span.attributes, cv.OI_LLM_INPUT_MESSAGES, "user")
        if text:
            return text
    roots = [s for s in spans if s.parent_id is None]
    value = roots[0].attributes.get(cv.OI_INPUT_VALUE) if roots else None
    return value if isinstance(value, str) and value else None


def final_answer(spans: list[Found]) -> str | None:
    roots = [s for s in spans if s.parent_id is None]
    for span in [*roots, *reversed(spans)]:  # the root's output, else the last model answer
        text = _text_of_messages(span.attributes.get(cv.OUTPUT_MESSAGES), "assistant", last=True)
        text = text or _openinference_message(
            span.attributes, cv.OI_LLM_OUTPUT_MESSAGES, "assistant", last=True
        )
        if span in roots and not text and isinstance(span.attributes.get(cv.OI_OUTPUT_VALUE), str):
            text = span.attributes[cv.OI_OUTPUT_VALUE]
        if text:
            return str(text)
    return None


def _raise_spec(error: str) -> str:
    """A mock's ``raise:`` for a recorded error.

    ``Type: message`` as it came, else a ``ToolError``.
    """
    return error if re.match(r"^[A-Za-z_][\w.]*: ", error) else f"ToolError: {error}"


def case_of(spans: list[Found], source: str) -> dict[str, Any]:
    """The native eval file of one trace's spans: one case."""
    query = first_user_message(spans)
    if query is None:
        raise CaptureError(
            f"{source}: the trace has no user message "
            "(gen_ai.input.messages, llm.input_messages or input.value)"
        )
    calls = []
    mocked_as = []  # the tool_mocks key of each call: ``server.tool`` for an MCP tool (SPEC §28)
    for found in spans:
        call = tool_call_of(found.as_span())
        if call is not None:
            server = tool_server_of(found.as_span())
            calls.append(call)
            mocked_as.append(f"{server}.{call[0]}" if server else call[0])
    mocks: dict[str, Any] = {}
    for name in dict.fromkeys(mocked_as):
        answers: list[Any] = [
            {"raise": _raise_spec(error)} if error is not None else result
            for key, (_, _, result, error) in zip(mocked_as, calls, strict=True)
            if key == name
        ]
        same = all(a == answers[0] for a in answers)
        mocks[name] = answers[0] if same else {"sequence": answers}
    trace_id = spans[0].trace_id
    case: dict[str, Any] = {"id": f"trace-{trace_id[:12]}", "input": query}
    if mocks:
        case["tool_mocks"] = mocks
    expect: dict[str, Any] = {}
    if calls:
        expect["tool_sequence"] = [
            {"name": name, "args": args} if args else name for name, args, _, _ in calls
        ]
    answer = final_answer(spans)
    if answer is not None:
        case["reference"] = answer
    if expect:
        case["expect"] = expect
    case["metadata"] = {"captured_from": {"trace_id": trace_id, "file": source}}
    return {"cases": [case]}
