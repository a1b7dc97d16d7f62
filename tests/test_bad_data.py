"""Bad data never stops the run, and nothing a data file says reaches the network (SPEC §13).

Each run puts a good file beside the bad ones: the good case passes, each bad file or case errors
with `path:line`. The bad files of this module's tests share one run per mode (serially, at
concurrency 8 and under -n 2): each file has a name of its own, and each test reads its own files'
outcomes and lines in that run.
"""

from __future__ import annotations

import http.server
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from agent_sources import SCRIPTED_AGENT
from shared_run import SharedRun, run_pytest, write_files
from test_bad_input import GOOD

from pytest_agent_eval.core.document import read_document
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.core.parse_cache import ParseCache
from pytest_agent_eval.text import bounded_repr, bounded_text

AGENT = "agent: scripted:run\n"

# Every run of this module's tests, serially, at concurrency 8 and under -n 2 (through the runs' own
# ini file).
MODES = {
    "serial": "-rA",
    "concurrent": "-rA --agent-eval-concurrency 8",
    "xdist": "-rA -n 2 --agent-eval-concurrency 8",
}


@pytest.fixture(scope="module", params=list(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def evals(evals: pytest.Pytester, mode: str) -> pytest.Pytester:
    evals.makeini(f"[pytest]\naddopts = {MODES[mode]}\n")
    return evals


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


@pytest.fixture(scope="module")
def loopback() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that records every request: its address and the paths asked for."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    _Recorder.hits = []
    yield f"http://127.0.0.1:{server.server_port}", _Recorder.hits
    server.shutdown()
    server.server_close()


def shared_run(base: Path, mode: str, files: dict[str, str], *options: str) -> SharedRun:
    """One run in the mode of `files` beside the good file and the scripted agent in `base`/run."""
    path = base / "run"
    write_files(path, {"scripted.py": SCRIPTED_AGENT, "eval_good.yaml": GOOD, **files})
    (path / "tox.ini").write_text(f"[pytest]\naddopts = {' '.join([MODES[mode], *options])}\n")
    result = run_pytest(path)
    result.matcher.fnmatch_lines(["*eval_good.yaml*"])
    assert result.outcomes("eval_good.yaml") == {"passed": 1}, repr(result)
    return result


def billion_laughs(levels: int = 9) -> str:
    lines = ['      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in itertools.pairwise("abcdefghij"[: levels + 1]):
        lines.append(f"      {name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines)


FAILING = (
    f"{AGENT}cases:\n  - id: bomb\n    input: x\n    expect: {{contains: [missing]}}\n    metadata:"
)

NOT_STRINGS = [  # file, case, line, message
    ("eval_keys_int", "  - {id: a, input: x, 1: y}", 3, 'key 1 is not a string; quote it: "1"'),
    (
        "eval_keys_true",
        "  - id: a\n    input: x\n    expect: {true: x}",
        5,
        'key True is not a string; quote it: "true"',
    ),
    (
        "eval_keys_null",
        "  - id: a\n    input: x\n    null: x",
        5,
        'key None is not a string; quote it: "null"',
    ),
]

TAGS = {
    "eval_tags_wip": "_wip",
    "eval_tags_class": "__class__",
    "eval_tags_newline": '"kb\\n"',
    "eval_tags_space": "kb search",
}

DUPLICATE_YAML = (
    f"{AGENT}cases:\n  - {{id: a, input: x}}\ncases:\n  - id: b\n    input: y\n    input: z\n"
)
DUPLICATE_JSON = (
    '{\n "agent": "scripted:run",\n "cases": [{"id": "a", "input": "x"}],\n "cases": [\n'
    '  {"id": "b", "input": "y",\n   "metadata": {"k": 1,\n    "k": 2}}]\n}\n'
)

FIELDS = [  # file, field, message
    (
        "eval_field_repeat",
        "repeat: 2.0",
        "cases[1].repeat: 2.0 is not a whole number without a fraction",
    ),
    ("eval_field_timeout_nan", "timeout: .nan", "cases[1].timeout: nan is not a finite number"),
    (
        "eval_field_rate_nan",
        "min_pass_rate: .nan",
        "cases[1].min_pass_rate: nan is not a finite number",
    ),
    ("eval_field_timeout_inf", "timeout: .inf", "cases[1].timeout: inf is not a finite number"),
    (
        "eval_field_id",
        'id: "b\\n"',
        "cases[1].id: 'b\\n' is not an id: letters, digits, `_` and `-` only",
    ),
]

BOM = (
    '\ufeff{"agent": "scripted:run", "cases": [{"id": "b", "input": "x", '
    '"context": {"say": "ok"}}]}'
)


def refs_file(address: str, local: Path) -> str:
    say = 'context: {say: \'{"n": "one"}\'}'
    schema = "{properties: {n: {$ref: '%s'}}, $defs: {s: {type: string}}}"
    cases = [
        f"  - id: {name}\n    input: x\n    {say}\n    expect: {{output_schema: {schema % ref}}}"
        for name, ref in (
            ("http", f"{address}/s.json"),
            ("file", local.as_uri()),
            ("inside", "#/$defs/s"),
        )
    ]
    return AGENT + "cases:\n" + "\n".join(cases) + "\n"


@pytest.fixture(scope="module")
def bad_run(
    mode: str, tmp_path_factory: pytest.TempPathFactory, loopback: tuple[str, list[str]]
) -> SharedRun:
    """Every bad file of this module's tests (but the tag files) in one run."""
    base = tmp_path_factory.mktemp(f"bad-data-{mode}")
    local = base / "local.json"  # outside the rootdir: messages name it in full
    local.write_text('{"type": "integer"}')
    files = {f"{name}.yaml": f"{AGENT}cases:\n{case}\n" for name, case, _, _ in NOT_STRINGS}
    files["eval_cat.json"] = '{"kb": [{"input": "q", "expected": "a", "tags": ["kb search"]}]}'
    files |= {"eval_dup.yaml": DUPLICATE_YAML, "eval_dup.json": DUPLICATE_JSON}
    files["eval_bomb.yaml"] = f"{FAILING}\n{billion_laughs()}\n"
    files["eval_big.yaml"] = (
        f"{FAILING}\n{billion_laughs(4)}\n"  # 9**5 = 59,049 values: within the budget
    )
    for name, field, _ in FIELDS:
        files[f"{name}.yaml"] = (
            f"{AGENT}cases:\n  - {{id: a, input: x, context: {{say: ok}}}}\n  - "
            f"input: x\n    {field}\n"
        )
    files["eval_bom.json"] = BOM
    files["eval_refs.yaml"] = refs_file(loopback[0], local)
    return shared_run(base, mode, files)


@pytest.fixture(scope="module")
def tags_run(mode: str, tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """The files with a tag that cannot be a marker, in one run of the mode, --strict-markers on."""
    ok = "  - {id: ok, input: x, context: {say: ok}}"
    files = {
        f"{name}.yaml": f"{AGENT}cases:\n{ok}\n  - id: tagged\n    input: x\n    tags: [{tag}]\n"
        for name, tag in TAGS.items()
    }
    return shared_run(tmp_path_factory.mktemp(f"bad-tags-{mode}"), mode, files, "--strict-markers")


@pytest.mark.parametrize(
    ("name", "line", "message"), [(name, line, message) for name, _, line, message in NOT_STRINGS]
)
def test_a_key_that_is_not_a_string(bad_run: SharedRun, name: str, line: int, message: str) -> None:
    bad_run.assert_outcomes(("eval_good.yaml", f"{name}.yaml"), passed=1, errors=1)
    bad_run.shows(f"{name}.yaml:{line}: {message}")


@pytest.mark.parametrize("name", TAGS)
def test_a_tag_that_cannot_be_a_marker_is_an_error(tags_run: SharedRun, name: str) -> None:
    tags_run.assert_outcomes(("eval_good.yaml", f"{name}.yaml"), passed=2, errors=1)
    tags_run.matcher.fnmatch_lines(
        [f"*{name}.yaml:6: cases[[]1].tags[[]0]: * is not a tag: a tag starts with*"]
    )


def test_tags_select_with_dashes_and_digits(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml",
        eval_tags=f"{AGENT}cases:\n  - {{id: a, input: x, tags: [kb-search, 2fa]}}\n"
        "  - {id: b, input: y}\n",
    )
    result = evals.runpytest("--strict-markers", "-m", "kb-search and 2fa")
    assert (
        result.parseoutcomes().get("passed") == 1 and result.ret == 0
    )  # xdist deselects on its workers, unseen
    result.stdout.fnmatch_lines(["PASSED eval_tags.yaml::a"])
    result.stdout.no_fnmatch_line("*eval_tags.yaml::b*")


def test_a_dialect_tag_that_cannot_be_a_marker_is_an_error(bad_run: SharedRun) -> None:
    bad_run.assert_outcomes(("eval_good.yaml", "eval_cat.json"), passed=1, errors=1)
    bad_run.matcher.fnmatch_lines(
        ["*eval_cat.json:1: kb[[]0].tags[[]0]: 'kb search' is not a tag*"]
    )


@pytest.mark.parametrize(
    ("name", "messages"),
    [
        ("eval_dup.yaml", ["eval_dup.yaml:4: duplicate key 'cases' (first at line 2); remove one",
                           "eval_dup.yaml:7: duplicate key 'input' (first at line 6); remove one"]),
        ("eval_dup.json", ["eval_dup.json:4: duplicate key 'cases' (first at line 3); remove one",
                           "eval_dup.json:7: duplicate key 'k' (first at line 6); remove one"]),
    ],
)  # fmt: skip
def test_duplicate_keys_name_both_lines(bad_run: SharedRun, name: str, messages: list[str]) -> None:
    bad_run.assert_outcomes(("eval_good.yaml", name), passed=1, errors=1)
    bad_run.shows(*messages)


@pytest.mark.timeout(300)  # a hang guard, not a measure: expanded, the bomb would never finish
def test_an_alias_bomb_is_an_error_at_load(bad_run: SharedRun) -> None:
    assert len(f"{FAILING}\n{billion_laughs()}\n") < 1000
    bad_run.assert_outcomes(
        ("eval_good.yaml", "eval_bomb.yaml"), passed=1, errors=1
    )  # the good file still runs
    bad_run.matcher.fnmatch_lines(
        ["*eval_bomb.yaml:8: aliases expand this file's data to * values (more than 100,000*"]
    )


def test_a_failure_text_is_bounded(bad_run: SharedRun) -> None:
    # 9**5 = 59,049 values through aliases: within the alias budget, far too many to print
    bad_run.assert_outcomes(("eval_good.yaml", "eval_big.yaml"), passed=1, failed=1)
    failure = bad_run.section("eval_big.yaml")
    pytest.LineMatcher(failure.splitlines()).fnmatch_lines(
        ["  metadata: {'a': ['lol', *... (cut at 4,000 characters)"]
    )
    assert len(failure) < 20_000


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


@pytest.mark.parametrize(("name", "message"), [(name, message) for name, _, message in FIELDS])
def test_numbers_and_ids_the_schema_used_to_accept(
    bad_run: SharedRun, name: str, message: str
) -> None:
    bad_run.assert_outcomes(("eval_good.yaml", f"{name}.yaml"), passed=2, errors=1)
    bad_run.shows(f"{name}.yaml:5: {message} (case case-2)")


def test_a_json_byte_order_mark_is_read(bad_run: SharedRun) -> None:
    assert (bad_run.path / "eval_bom.json").read_bytes().startswith("\ufeff".encode())
    bad_run.assert_outcomes(("eval_good.yaml", "eval_bom.json"), passed=2)


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
    mine_entry.write_bytes(
        theirs_entry.read_bytes()
    )  # another file's entry under this content's name
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
def test_deep_data_is_an_error_at_its_line(
    tmp_path: Path, name: str, text: str, line: int, depth: int
) -> None:
    nested = "[" * depth + "]" * depth
    with pytest.raises(EvalFileError) as raised:
        read_document(tmp_path / name, text % nested)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / name}:{line}: ")
    assert message.endswith("nested deeper than 50 levels; flatten it")


def test_recursive_aliases_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(
        EvalFileError, match=r"eval_r.yaml:3: cases\[0\].metadata.x\[0\]: an alias refers to a"
    ):
        read_document(
            tmp_path / "eval_r.yaml", "cases:\n  - input: x\n    metadata: &m {x: [*m]}\n"
        )


def test_errors_of_the_reader_name_a_line(tmp_path: Path) -> None:
    with pytest.raises(
        EvalFileError,
        match=r"eval_c.yaml:2: YAML error: control characters are not allowed \('\\x00'\)",
    ):
        read_document(tmp_path / "eval_c.yaml", "cases:\n  - input: \x00\n")


def test_duplicates_are_all_reported(tmp_path: Path) -> None:
    with pytest.raises(EvalFileErrors) as raised:
        read_document(tmp_path / "eval_d.yaml", "a: 1\nb: {x: 1, x: 2}\na: 3\n")
    assert [e.format().split(": ", 1)[1] for e in raised.value.errors] == [
        "duplicate key 'x' (first at line 2); remove one",
        "duplicate key 'a' (first at line 1); remove one",
    ]


def test_output_schema_refs_resolve_only_inside_the_schema(
    bad_run: SharedRun, loopback: tuple[str, list[str]]
) -> None:
    address, hits = loopback
    local = bad_run.path.parent / "local.json"
    bad_run.assert_outcomes(("eval_good.yaml", "eval_refs.yaml"), passed=2, failed=2)
    assert hits == []
    bad_run.matcher.fnmatch_lines(
        [f"*$ref '{address}/s.json' is not inside the schema: only references within it*"]
    )
    bad_run.matcher.fnmatch_lines([f"*$ref '{local.as_uri()}' is not inside the schema*"])


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
