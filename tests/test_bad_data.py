"""Bad data never stops the run, and nothing a data file says reaches the network (SPEC §13).

Each run puts a good file beside the bad one: the good case passes, the bad file or case errors with `path:line`.
"""

from __future__ import annotations

import http.server
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from test_bad_input import run_with, shows

from pytest_agent_eval.cases.cache import ParseCache
from pytest_agent_eval.cases.document import read_document
from pytest_agent_eval.cases.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.report.render import bounded_repr, bounded_text

AGENT = "agent: scripted:run\n"

# Every run of this module's tests, serially, at concurrency 8 and under -n 2 (through the runs' own ini file).
MODES = {
    "serial": "-rA",
    "concurrent": "-rA --agent-eval-concurrency 8",
    "xdist": "-rA -n 2 --agent-eval-concurrency 8",
}


@pytest.fixture(params=list(MODES))
def evals(evals: pytest.Pytester, request: pytest.FixtureRequest) -> pytest.Pytester:
    evals.makeini(f"[pytest]\naddopts = {MODES[request.param]}\n")
    return evals


@pytest.mark.parametrize(
    ("case", "line", "message"),
    [
        ("  - {id: a, input: x, 1: y}", 3, 'key 1 is not a string; quote it: "1"'),
        ("  - id: a\n    input: x\n    expect: {true: x}", 5, 'key True is not a string; quote it: "true"'),
        ("  - id: a\n    input: x\n    null: x", 5, 'key None is not a string; quote it: "null"'),
    ],
)
def test_a_key_that_is_not_a_string(evals: pytest.Pytester, case: str, line: int, message: str) -> None:
    result = run_with(evals, eval_keys=f"{AGENT}cases:\n{case}\n")
    result.assert_outcomes(passed=1, errors=1)
    shows(result, f"eval_keys.yaml:{line}: {message}")


@pytest.mark.parametrize("tag", ["_wip", "__class__", '"kb\\n"', "kb search"])
def test_a_tag_that_cannot_be_a_marker_is_an_error(evals: pytest.Pytester, tag: str) -> None:
    evals.makeini((evals.path / "tox.ini").read_text().rstrip() + " --strict-markers\n")  # the mode, and strict
    ok = "  - {id: ok, input: x, context: {say: ok}}"
    bad = f"{AGENT}cases:\n{ok}\n  - id: tagged\n    input: x\n    tags: [{tag}]\n"
    result = run_with(evals, eval_tags=bad)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*eval_tags.yaml:6: cases[[]1].tags[[]0]: * is not a tag: a tag starts with*"])


def test_tags_select_with_dashes_and_digits(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml", eval_tags=f"{AGENT}cases:\n  - {{id: a, input: x, tags: [kb-search, 2fa]}}\n  - {{id: b, input: y}}\n"
    )
    result = evals.runpytest("--strict-markers", "-m", "kb-search and 2fa")
    assert result.parseoutcomes().get("passed") == 1 and result.ret == 0  # xdist deselects on its workers, unseen
    result.stdout.fnmatch_lines(["PASSED eval_tags.yaml::a"])
    result.stdout.no_fnmatch_line("*eval_tags.yaml::b*")


def test_a_dialect_tag_that_cannot_be_a_marker_is_an_error(evals: pytest.Pytester) -> None:
    suite = '{"kb": [{"input": "q", "expected": "a", "tags": ["kb search"]}]}'
    result = run_with(evals, eval_cat_json=suite)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*eval_cat.json:1: kb[[]0].tags[[]0]: 'kb search' is not a tag*"])


DUPLICATE_YAML = f"{AGENT}cases:\n  - {{id: a, input: x}}\ncases:\n  - id: b\n    input: y\n    input: z\n"
DUPLICATE_JSON = (
    '{\n "agent": "scripted:run",\n "cases": [{"id": "a", "input": "x"}],\n "cases": [\n'
    '  {"id": "b", "input": "y",\n   "metadata": {"k": 1,\n    "k": 2}}]\n}\n'
)


@pytest.mark.parametrize(
    ("name", "text", "messages"),
    [
        ("eval_dup", DUPLICATE_YAML, ["eval_dup.yaml:4: duplicate key 'cases' (first at line 2); remove one",
                                      "eval_dup.yaml:7: duplicate key 'input' (first at line 6); remove one"]),
        ("eval_dup_json", DUPLICATE_JSON, ["eval_dup.json:4: duplicate key 'cases' (first at line 3); remove one",
                                           "eval_dup.json:7: duplicate key 'k' (first at line 6); remove one"]),
    ],
)  # fmt: skip
def test_duplicate_keys_name_both_lines(evals: pytest.Pytester, name: str, text: str, messages: list[str]) -> None:
    result = run_with(evals, **{name: text})
    result.assert_outcomes(passed=1, errors=1)
    shows(result, *messages)


def billion_laughs(levels: int = 9) -> str:
    lines = ['      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in itertools.pairwise("abcdefghij"[: levels + 1]):
        lines.append(f"      {name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines)


FAILING = f"{AGENT}cases:\n  - id: bomb\n    input: x\n    expect: {{contains: [missing]}}\n    metadata:"


@pytest.mark.timeout(300)  # a hang guard, not a measure: expanded, the bomb would never finish
def test_an_alias_bomb_is_an_error_at_load(evals: pytest.Pytester) -> None:
    bomb = f"{FAILING}\n{billion_laughs()}\n"
    assert len(bomb) < 1000
    result = run_with(evals, eval_bomb=bomb)
    result.assert_outcomes(passed=1, errors=1)  # the good file beside it still runs
    result.stdout.fnmatch_lines(["*eval_bomb.yaml:8: aliases expand this file's data to * values (more than 100,000*"])


def test_a_failure_text_is_bounded(evals: pytest.Pytester) -> None:
    # 9**5 = 59,049 values through aliases: within the alias budget, far too many to print
    big = f"{FAILING}\n{billion_laughs(4)}\n"
    result = run_with(evals, eval_big=big)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["  metadata: {'a': ['lol', *... (cut at 4,000 characters)"])
    assert len(result.stdout.str()) < 20_000


@pytest.mark.timeout(60)  # a hang guard, not a measure: 9**13 values are never walked
def test_bounded_repr_is_cut_in_time_not_in_size() -> None:
    value: object = ["lol"] * 9
    for _ in range(12):  # 9**13 values when expanded
        value = [value] * 9
    text = bounded_repr({"x": value}, limit=500)
    assert text.startswith("{'x': [[[[") and text.endswith("... (cut at 500 characters)")
    assert bounded_text("y" * 10) == "y" * 10
    assert bounded_text("y" * 10, limit=4) == "yyyy... (cut at 4 of 10 characters)"
    assert bounded_text({"a": [1, 2]}) == "{'a': [1, 2]}"


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("repeat: 2.0", "cases[1].repeat: 2.0 is not a whole number without a fraction"),
        ("timeout: .nan", "cases[1].timeout: nan is not a finite number"),
        ("min_pass_rate: .nan", "cases[1].min_pass_rate: nan is not a finite number"),
        ("timeout: .inf", "cases[1].timeout: inf is not a finite number"),
        ('id: "b\\n"', "cases[1].id: 'b\\n' is not an id: letters, digits, `_` and `-` only"),
    ],
)
def test_numbers_and_ids_the_schema_used_to_accept(evals: pytest.Pytester, field: str, message: str) -> None:
    bad = f"{AGENT}cases:\n  - {{id: a, input: x, context: {{say: ok}}}}\n  - input: x\n    {field}\n"
    result = run_with(evals, eval_field=bad)
    result.assert_outcomes(passed=2, errors=1)
    shows(result, f"eval_field.yaml:5: {message} (case case-2)")


def test_a_json_byte_order_mark_is_read(evals: pytest.Pytester) -> None:
    evals.path.joinpath("eval_bom.json").write_text(
        '\ufeff{"agent": "scripted:run", "cases": [{"id": "b", "input": "x", "context": {"say": "ok"}}]}',
        encoding="utf-8",
    )
    run_with(evals).assert_outcomes(passed=2)


def test_a_cache_entry_only_serves_the_content_it_was_made_from(tmp_path: Path) -> None:
    cache = ParseCache(tmp_path / "cache")
    path = tmp_path / "eval_a.yaml"
    mine, theirs = "cases:\n  - {id: mine, input: x}\n", "cases:\n  - {id: theirs, input: y}\n"
    read_document(path, theirs, cache)
    read_document(path, mine, cache)
    entries = {p.read_bytes(): p for p in (tmp_path / "cache").iterdir()}
    assert len(entries) == 2
    mine_entry = next(p for p in entries.values() if b"mine" in p.read_bytes())
    theirs_entry = next(p for p in entries.values() if b"theirs" in p.read_bytes())
    mine_entry.write_bytes(theirs_entry.read_bytes())  # another file's entry under this content's name
    assert read_document(path, mine, cache).data["cases"][0]["id"] == "mine"


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("eval_deep.yaml", "cases:\n  - input: x\n    metadata: {k: %s}\n", 3),
        ("eval_deep.yaml", "cases:\n  - input: %s\n", 2),
        ("eval_deep.json", '{"cases": [\n{"input": "x",\n "metadata": %s}]}', 3),
        ("eval_deep.json", '{"cases": [\n{"input": %s}]}', 2),
        ("eval_deep.json", '{"cases": [\n{"input": "x",\n "metadata": {"k": %s}}]}', 3),
    ],
)
@pytest.mark.parametrize("depth", [60, 10_000])
def test_deep_data_is_an_error_at_its_line(tmp_path: Path, name: str, text: str, line: int, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    with pytest.raises(EvalFileError) as raised:
        read_document(tmp_path / name, text % nested)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / name}:{line}: ")
    assert message.endswith("nested deeper than 50 levels; flatten it")


def test_recursive_aliases_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(EvalFileError, match=r"eval_r.yaml:3: cases\[0\].metadata.x\[0\]: an alias refers to a"):
        read_document(tmp_path / "eval_r.yaml", "cases:\n  - input: x\n    metadata: &m {x: [*m]}\n")


def test_errors_of_the_reader_name_a_line(tmp_path: Path) -> None:
    with pytest.raises(
        EvalFileError, match=r"eval_c.yaml:2: YAML error: control characters are not allowed \('\\x00'\)"
    ):
        read_document(tmp_path / "eval_c.yaml", "cases:\n  - input: \x00\n")


def test_duplicates_are_all_reported(tmp_path: Path) -> None:
    with pytest.raises(EvalFileErrors) as raised:
        read_document(tmp_path / "eval_d.yaml", "a: 1\nb: {x: 1, x: 2}\na: 3\n")
    assert [e.format().split(": ", 1)[1] for e in raised.value.errors] == [
        "duplicate key 'x' (first at line 2); remove one",
        "duplicate key 'a' (first at line 1); remove one",
    ]


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "integer"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def loopback() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that records every request: its address and the paths asked for."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.hits = []
    yield f"http://127.0.0.1:{server.server_port}", _Recorder.hits
    server.shutdown()
    server.server_close()


def test_output_schema_refs_resolve_only_inside_the_schema(
    evals: pytest.Pytester, loopback: tuple[str, list[str]]
) -> None:
    address, hits = loopback
    local = evals.path.parent / "local.json"  # outside the rootdir: messages name it in full
    local.write_text('{"type": "integer"}')
    say = 'context: {say: \'{"n": "one"}\'}'
    schema = "{properties: {n: {$ref: '%s'}}, $defs: {s: {type: string}}}"
    cases = [
        f"  - id: {name}\n    input: x\n    {say}\n    expect: {{output_schema: {schema % ref}}}"
        for name, ref in (("http", f"{address}/s.json"), ("file", local.as_uri()), ("inside", "#/$defs/s"))
    ]
    result = run_with(evals, eval_refs=AGENT + "cases:\n" + "\n".join(cases) + "\n")
    result.assert_outcomes(passed=2, failed=2)
    assert hits == []
    result.stdout.fnmatch_lines([f"*$ref '{address}/s.json' is not inside the schema: only references within it*"])
    result.stdout.fnmatch_lines([f"*$ref '{local.as_uri()}' is not inside the schema*"])


NOISY = """
from pathlib import Path
Path(__file__).with_name("imported.txt").write_text("imported")
print("IMPORTED")
def run(query, context):
    return "x"
"""


def test_validate_and_collect_only_import_nothing(evals: pytest.Pytester) -> None:
    evals.makepyfile(noisy_agent_module=NOISY)
    evals.makefile(
        ".yaml",
        eval_noisy="agent: noisy_agent_module:run\ntool_dispatch: noisy_agent_module:run\ncases:\n"
        "  - {id: a, input: x, expect: {custom: [noisy_agent_module:run]}}\n",
    )
    validated = evals.run("agent-eval", "validate", str(evals.path))
    assert validated.ret == 0, validated.stdout.str()
    collected = evals.runpytest_subprocess("--collect-only", "-q")
    collected.stdout.fnmatch_lines(["eval_noisy.yaml::a"])
    assert "IMPORTED" not in validated.stdout.str() + collected.stdout.str()
    assert not (evals.path / "imported.txt").exists()
