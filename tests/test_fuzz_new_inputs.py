"""A standing guard on the inputs added since the loader's (issue 27): mutated, a clean error.

Saved reports fed to ``agent-eval compare``, ``html``, ``merge`` and ``gate`` (issue 28),
baselines, cassettes, and provider responses through the traffic hook. Mutated inputs give the
plugin's own clean error (exit 2, ``BaselineError``, ``CassetteError``, a transport error), never
another exception.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agent_eval.cli import main
from pytest_agent_eval.report.baseline import BaselineError, Comparison, compare, load_records
from pytest_agent_eval.report.record import CaseRecord, CheckRecord, ToolCallRecord, TrialRecord
from pytest_agent_eval.traffic.cassette import Cassette, CassetteError, match_key

EXAMPLES = 300
FUZZ = settings(
    max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)


def _record(nodeid: str, outcome: str, passes: int, trials: int) -> dict[str, Any]:
    check = CheckRecord("contains", passes > 0, 1.0 if passes else 0.0, "lacks 'x'", ["x"], "out")
    return CaseRecord(
        nodeid=nodeid,
        case_id=nodeid.rpartition("::")[2],
        file=nodeid.partition("::")[0],
        line=3,
        outcome=outcome,
        tags=["kb"],
        description="a case",
        metadata={"owner": "me"},
        score=passes / trials,
        min_score=0.5,
        passes=passes,
        trials=[
            TrialRecord(n < passes, 1.0 if n < passes else 0.0, 0.25, tokens={"input": 3})
            for n in range(trials)
        ],
        checks=[check],
        tool_calls=[ToolCallRecord("search", {"q": "x"}, "found")],
        output="the answer",
        transcript=[{"role": "user", "content": "hi"}],
        latency_s=0.25,
        tokens={"input": 3, "output": 4, "total": 7},
        cost=0.01,
        unpriced_models=[],
        agent="a",
        conversation={"timing": "1.0"},
        input={"query": "hi"},
        content_hash="0123456789abcdef",
    ).to_dict()


REPORT: dict[str, Any] = {
    "schema_version": 1,
    "run": {"started": "2026-01-01T00:00:00+00:00", "duration_s": 1.5, "finished": True,
            "exit_status": 1, "args": ["-q"], "git_commit": None, "plugin_version": "0",
            "pytest_version": "9", "python_version": "3",
            "shard": {"index": 1, "count": 2, "collected": 4, "selected": 2}},
    "agents": {"a": {"passed": 1, "total": 2, "pass_rate": 0.5, "mean_score": 0.5,
                     "latency_p50_s": 0.2, "latency_p95_s": 0.3, "tokens": 7, "cost": 0.01}},
    "baseline": {**Comparison(tolerance=0.05).to_dict(), "path": "base.json"},
    "cases": [_record("eval_a.yaml::one", "passed", 1, 1),
              _record("eval_a.yaml::two", "failed", 1, 3)],
    "not_run": [{"nodeid": "eval_a.yaml::three", "file": "eval_a.yaml", "line": 9,
                 "reason": "worker crashed"}],
}  # fmt: skip
OTHER_SHARD: dict[str, Any] = {
    **REPORT,
    "run": {**REPORT["run"], "shard": {"index": 2, "count": 2, "collected": 4, "selected": 2}},
    "cases": [_record("eval_a.yaml::four", "passed", 1, 1)],
    "not_run": [],
}
ODD = st.sampled_from(
    [None, True, False, 0, -1, 1.5, 1e308, 10**30, "", "x", "\ud83d", "<script>", "a|b", [], {},
     [None], {"": 1}, {"x": [1]}, "NaN", [[[[[]]]]], "passed", "error", "eval_a.yaml::one"]
)  # fmt: skip
KEYS = st.sampled_from(
    ["", "x", "nodeid", "trials", "cases", "score", "baseline", "__class__", "regressions"]
)


def _paths(data: Any, key: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [key]
    if isinstance(data, dict):
        for k, v in data.items():
            out.extend(_paths(v, (*key, k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.extend(_paths(v, (*key, i)))
    return out


def _mutated(draw: st.DrawFn, seed: Any) -> Any:
    """``seed`` with one to three of its values replaced, keys added or entries deleted."""
    data = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        target = draw(st.sampled_from(paths))
        parent = data
        for part in target[:-1]:
            parent = parent[part]
        kind = draw(st.sampled_from(["value", "key", "delete"]))
        odd = copy.deepcopy(
            draw(ODD)
        )  # a value of its own: mutated later, the sampled one stays as it is
        if kind == "value":
            parent[target[-1]] = odd
        elif kind == "delete":
            del parent[target[-1]]
        elif isinstance(parent, dict):
            parent[draw(KEYS)] = odd
        else:
            parent.append(odd)
    return data


@st.composite
def reports(draw: st.DrawFn) -> str:
    """A saved report with values changed, or its text cut or with a byte flipped."""
    text = json.dumps(_mutated(draw, REPORT), ensure_ascii=False)
    op = draw(st.sampled_from(["as is", "cut", "flip", "constant"]))
    if op == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif op == "flip":
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.sampled_from(list('{}[]:,"\\0 \ufeff'))) + text[i + 1 :]
    elif op == "constant":
        text = text.replace(
            "1.5", draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"])), 1
        )
    return text


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


@FUZZ
@given(reports())
def test_mutated_saved_reports_give_a_clean_error_in_compare_html_merge_and_gate(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        good = _write(folder, "good.json", json.dumps(REPORT))
        other = _write(folder, "other.json", json.dumps(OTHER_SHARD))
        bad = _write(folder, "bad.json", text)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            for argv in (
                ["compare", str(good), str(bad)],
                ["compare", str(bad), str(good), "--markdown"],
                ["html", str(bad), "-o", str(folder / "page.html")],
                ["html", str(good), str(bad), "-o", str(folder / "page2.html")],
                ["merge", str(other), str(bad), "-o", str(folder / "merged.json")],
                ["merge", str(bad), "-o", str(folder / "alone.json")],
                [
                    "gate",
                    str(bad),
                    "--min-pass-rate",
                    "0.5",
                    "--max-cost",
                    "1",
                    "--max-p95-latency",
                    "1",
                ],
                [
                    "gate",
                    str(good),
                    "--baseline",
                    str(bad),
                    "--markdown",
                    str(folder / "summary.md"),
                ],
            ):
                assert main(argv) in (0, 1, 2), argv
        assert "Traceback" not in out.getvalue()


@FUZZ
@given(reports())
def test_mutated_baselines_load_as_records_or_give_a_baseline_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "base.json", text)
        try:
            records = load_records(path)
        except BaselineError as exc:
            assert str(exc).startswith(str(path))
            return
        mine = load_records(_write(Path(tmp), "run.json", json.dumps(REPORT)))
        for result in (compare(records, mine), compare(mine, records)):
            result.lines(), result.table(), result.markdown(), result.to_dict()


CASSETTE = {
    "interactions": [
        {
            "request": {"body": '{"model": "m", "messages": []}',
                        "headers": {"Content-Type": ["application/json"]}, "method": "POST",
                        "uri": "http://127.0.0.1:1/v1/chat/completions"},
            "response": {"status": {"code": 200, "message": "OK"},
                         "headers": {"Content-Type": ["application/json"]},
                         "body": {"string": '{"usage": {"prompt_tokens": 1}}'}},
            "trial": 1,
        }
    ],
    "version": 1,
}  # fmt: skip


@st.composite
def cassettes(draw: st.DrawFn) -> str:
    text = yaml.safe_dump(_mutated(draw, CASSETTE), allow_unicode=True)
    if draw(st.booleans()):
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(
            i,
            draw(
                st.sampled_from(
                    ["&a [*a]\n", "x: *a\n", "- !!binary AAA\n", "{\n", "\t\n", "? [a]\n"]
                )
            ),
        )
        text = "".join(lines)
    return text


@FUZZ
@given(cassettes())
def test_mutated_cassettes_load_or_give_a_cassette_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "case.yaml", text)
        try:
            cassette = Cassette(path, frozenset({"model"}))
        except CassetteError as exc:
            assert str(path) in str(exc)
            return
        for interaction in cassette.interactions:
            hit = cassette.take(cassette.key(interaction))
            assert hit is not None
            hit.response_bytes  # noqa: B018 - what a replay hands the client
        cassette.take(match_key("POST", "http://127.0.0.1:1/x", b"{}", frozenset()))


# -- provider responses through the traffic hook
# -----------------------------------------------------------------

httpx = pytest.importorskip("httpx")

USAGES = st.one_of(
    ODD,
    st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": ODD, "completion_tokens": ODD, "total_tokens": ODD,
            "input_tokens": ODD, "output_tokens": ODD,
            "prompt_tokens_details": st.one_of(ODD, st.fixed_dictionaries(
                {}, optional={"cached_tokens": ODD})), "cache_read_input_tokens": ODD,
        },
    ),
)  # fmt: skip


@st.composite
def responses(draw: st.DrawFn) -> tuple[int, list[tuple[str, str]], bytes]:
    status = draw(st.sampled_from([200, 201, 204, 301, 400, 401, 404, 418, 429, 500, 503, 599]))
    content_type = draw(
        st.sampled_from(["application/json", "text/event-stream", "text/html", "", "application/x"])
    )
    headers = [("content-type", content_type)] if content_type else []
    for name in draw(
        st.lists(st.sampled_from(["retry-after", "x-ratelimit-remaining", "content-encoding"]))
    ):
        headers.append(
            (
                name,
                draw(
                    st.sampled_from(["", "1", "-1", "abc", "Wed, 21 Oct 2015 07:28:00 GMT", "nan"])
                ),
            )
        )
    body = {
        "id": "x",
        "model": draw(st.sampled_from(["m", "", None, 5, "gpt-4o"])),
        "usage": draw(USAGES),
    }
    text = json.dumps(body, ensure_ascii=False)
    shape = draw(st.sampled_from(["json", "stream", "cut", "bytes"]))
    if shape == "stream":
        text = f"data: {text}\n\ndata: [DONE]\n\n"
    elif shape == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    raw = text.encode("utf-8", "surrogatepass")
    if shape == "bytes":
        raw = draw(st.binary(max_size=64))
    return status, headers, raw


@FUZZ
@given(responses())
def test_provider_responses_through_the_traffic_hook_are_counted_or_fail_cleanly(
    response: tuple[int, list[tuple[str, str]], bytes],
) -> None:
    from pytest_agent_eval.traffic.hook import Traffic, TrafficSettings
    from pytest_agent_eval.traffic.scope import CaseTraffic

    status, headers, raw = response
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for mode in (None, "record"):
            cassette = Cassette(folder / "c.yaml", frozenset(), load=False) if mode else None
            traffic = Traffic(TrafficSettings(root=folder, mode=mode, retries=0))
            trial = CaseTraffic("c", cassette).trial()
            request = httpx.Request(
                "POST", "http://127.0.0.1:1/v1/chat/completions", json={"model": "m"}
            )
            answer = traffic.handle(
                httpx,
                request,
                lambda r: httpx.Response(status, headers=headers, content=raw),
                trial,
            )
            assert answer.status_code == status and answer.content == raw
            trial.usage.as_dict()
            if cassette is not None:
                cassette.save(keep_old=False)
                Cassette(folder / "c.yaml", frozenset())  # what was written reads back


# -- SPEC §22: promptfoo configs, tests CSVs, dataset rows and every report reader
# -----------------------------

HOSTILE = st.sampled_from(
    ["{{ 1/0 }}", "{{ cycler.__init__.__globals__.os }}", "{{ x.__class__.__mro__ }}", "{% for %}",
     "{{ 'a' * 10**9 }}", "{{ 9 ** 9999999 }}", "{{ range(10**9) | list }}", "{{ v | load }}", "{{",
     "file://../../etc/hostname", "file:///etc/hostname", "file://*.csv", "file://../**/*.csv",
     "file:///*", "file://missing.json", "file://rows.csv", "file://vars.json",
     "file://broken.yaml", "file://.", "not-contains:", "similar(2):x", "javascript:1",
     "python:x.py", "file://x.py", "__threshold", "__expected", "__metadata:a", "__nope", "\x00",
     "é"]
)  # fmt: skip
VALUES = st.one_of(ODD, HOSTILE, st.lists(st.one_of(ODD, HOSTILE), max_size=4))
PROMPTFOO: dict[str, Any] = {
    "description": "fuzzed",
    "prompts": ["Hi {{ name }}", {"raw": "{{ v }} and {{ name }}", "label": "two"}],
    "providers": ["openai:gpt-4o-mini", {"id": "file://provider.py", "label": "py"}],
    "defaultTest": {
        "vars": {"name": "Ann"},
        "assert": [{"type": "contains", "value": "{{ name }}"}],
    },
    "tests": [
        {
            "description": "one",
            "vars": {"v": ["a", "b"]},
            "assert": [{"type": "icontains", "value": "a"}],
        },
        {
            "vars": {"v": "file://vars.json"},
            "threshold": 0.5,
            "assert": [{"type": "equals", "value": "x"}],
        },
        "file://rows.csv",
    ],
}
CHECK_SETTINGS = settings(
    max_examples=120, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)


def _mutated_with(draw: st.DrawFn, seed: Any) -> Any:
    """``seed`` with one to three values made odd or hostile (templates, paths out, bad types)."""
    data = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        target = draw(st.sampled_from(paths))
        parent = data
        for part in target[:-1]:
            parent = parent[part]
        parent[target[-1]] = copy.deepcopy(draw(VALUES))
    return data


@st.composite
def csv_texts(draw: st.DrawFn) -> bytes:
    cells = st.one_of(HOSTILE, st.text(max_size=8), st.just('"'), st.just("x" * 200_000))
    header = draw(st.lists(st.sampled_from(["name", "v", "__expected", "__threshold",
                                            "__description", "__x"]),
                           min_size=1, max_size=4))  # fmt: skip
    rows = draw(st.lists(st.lists(cells, max_size=5), max_size=4))
    text = "\n".join(",".join(row) for row in [header, *rows])
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += draw(st.sampled_from([b"\xe9", b"\xff\xfe", b"\x00", b'"']))
    return data


def _loads_cleanly(folder: Path, path: Path) -> None:
    """The file through ``validate`` (problems as lines) and the loader (its own errors only)."""
    from pytest_agent_eval.cases import trust
    from pytest_agent_eval.cases.load import builtin_dialects, load_file
    from pytest_agent_eval.checks import builtin_registry
    from pytest_agent_eval.cli import validate_file
    from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors

    checks, dialects = builtin_registry(), builtin_dialects()
    with trust.configured([folder], max_cases=500):
        _, problems, _ = validate_file(path, checks, dialects)
        assert all(isinstance(line, str) and "Traceback" not in line for line in problems)
        assert not any("please report this as a bug" in line for line in problems), problems
        with contextlib.suppress(EvalFileError, EvalFileErrors):
            load_file(path, checks, dialects)


@st.composite
def promptfoo_configs(draw: st.DrawFn) -> dict[str, Any]:
    return _mutated_with(draw, PROMPTFOO)  # type: ignore[no-any-return]


@CHECK_SETTINGS
@given(promptfoo_configs(), csv_texts())
def test_mutated_promptfoo_configs_and_csvs_load_as_cases_or_errors(
    config: dict[str, Any], rows: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "provider.py").write_text(
            "def call_api(prompt, options, context):\n    return {'output': prompt}\n"
        )
        (folder / "vars.json").write_text('{"a": [1, 2]}')
        (folder / "broken.yaml").write_text("a: [1,\n")
        (folder / "rows.csv").write_bytes(rows)
        path = folder / "promptfooconfig.yaml"
        path.write_text(yaml.safe_dump(config, allow_unicode=True))
        _loads_cleanly(folder, path)
        assert not (folder.parent / "PWNED").exists()


ROW = {"id": "r1", "input": {"question": "capital?"}, "expected": "Paris", "metadata": {"k": 1}}


@st.composite
def jsonl_rows(draw: st.DrawFn) -> bytes:
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["row", "mutated", "broken", "bytes"]))
        if kind == "row":
            lines.append(json.dumps(ROW).encode())
        elif kind == "mutated":
            lines.append(
                json.dumps(_mutated_with(draw, ROW), ensure_ascii=False).encode(
                    "utf-8", "surrogatepass"
                )
            )
        elif kind == "broken":
            lines.append(json.dumps(ROW)[: draw(st.integers(0, 20))].encode())
        else:
            lines.append(draw(st.binary(max_size=12)).replace(b"\n", b""))
    return b"\n".join(lines) + b"\n"


@CHECK_SETTINGS
@given(jsonl_rows())
def test_mutated_dataset_rows_load_as_cases_or_errors(text: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "eval_rows.jsonl"
        path.write_bytes(text)
        (folder / "eval_rows.expect.yaml").write_text("expect:\n  matches_reference: contains\n")
        _loads_cleanly(folder, path)


def _reads_or_says_which(read: Callable[[Path], dict[str, Any]], path: Path) -> None:
    """``read(path)`` gives a document every reader uses without raising, or one BaselineError.

    Every reader's own use (records, the resume's final records, the HTML page) raises nothing; the
    one ``BaselineError`` line names ``path``.
    """
    from pytest_agent_eval.plugin.resume import final_records
    from pytest_agent_eval.report.baseline import records_of
    from pytest_agent_eval.report.html import render

    try:
        document = read(path)
    except BaselineError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    records_of(document["cases"], path)
    final_records(document)
    render(document)


@FUZZ
@given(reports())
def test_every_report_reader_reads_a_mutated_report_or_says_which_field(text: str) -> None:
    """``load_report`` is every reader's door: past it, no reader's own use raises.

    The readers are merge, gate, compare, html, baseline and resume; their own use of the document
    (records, the resume's final records) raises nothing.
    """
    from pytest_agent_eval.report.baseline import load_report

    with tempfile.TemporaryDirectory() as tmp:
        _reads_or_says_which(load_report, _write(Path(tmp), "bad.json", text))


@FUZZ
@given(reports())
def test_a_journal_of_mutated_records_reads_or_says_which_line_and_field(text: str) -> None:
    """The journal is a report reader's door too (``agent-eval report``, ``--agent-eval-resume``).

    A mutated report's cases as a journal's lines read back, or give one ``BaselineError`` line
    naming the file and line.
    """
    from pytest_agent_eval.memory.journal import read_journal

    try:
        report = json.loads(text)
    except ValueError:
        return
    cases = report.get("cases") if isinstance(report, dict) else None
    lines = [{"journal": 1, "id": "r", "run": {"started": "2026-11-27T00:00:00+00:00"}}]
    lines += cases if isinstance(cases, list) else []
    with tempfile.TemporaryDirectory() as tmp:
        journal = _write(
            Path(tmp), "r.json.journal.jsonl", "".join(json.dumps(x) + "\n" for x in lines)
        )
        _reads_or_says_which(read_journal, journal)
