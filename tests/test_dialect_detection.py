"""Each format is detected from the file's shape; one fitting none or several gets a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dialect_support import SEED_DATA, answering, run_evals

from pytest_agent_eval.cases.load import builtin_dialects, load_file
from pytest_agent_eval.checks import builtin_registry
from pytest_agent_eval.core.errors import EvalFileError

SHAPES = [
    ("native", "cases:\n  - {id: a, input: hi, expect: {contains: [hi]}}\n"),
    (
        "native",
        "cases:\n  - {input: hi}\n",
    ),  # a `cases:` key is native, never a category named "cases"
    (
        "neon_suite",
        "name: s\ndefault_scorers: [grounding]\ncases:\n  - {name: a, input: {query: hi}}\n",
    ),
    ("neon_suite", "name: s\ncases:\n  - {name: a, input: {query: hi}, expected_tools: []}\n"),
    ("golden_set", '[{"id": "a", "input": "hi", "expected_contains": ["hi"]}]'),
    ("golden_set", '[{"id": "a", "input": "hi", "expected": {"tools_used": []}}]'),
    ("category_json", '{"math": [{"input": "hi", "expected": "4"}]}'),
    ("tool_routing", '[{"name": "a", "prompt": "hi", "expected_tools": []}]'),
]


@pytest.mark.parametrize(("dialect", "text"), SHAPES)
def test_format_is_detected_from_the_shape(tmp_path: Path, dialect: str, text: str) -> None:
    suffix = ".json" if text.startswith(("[", "{")) else ".yaml"
    path = tmp_path / f"eval_x{suffix}"
    path.write_text(text)
    loaded = load_file(path, builtin_registry(), builtin_dialects())
    assert loaded.dialect == dialect
    assert all(case.error is None for case in loaded.cases)


def test_a_file_of_no_known_shape_names_every_format_and_what_was_missing(
    pytester: pytest.Pytester,
) -> None:
    answering(pytester, {})
    pytester.makefile(".json", eval_odd=json.dumps([{"id": "a", "input": "hi"}]))
    result = run_evals(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_odd.json:1: not an eval file of any known format; compared with:",
            "  native: a mapping with a `cases:` list",
            "  neon_suite: a mapping with `cases:` and suite keys *",
            "  golden_set: a list of {id, input, *} (no item has `expected`, "
            "`expected_contains` or *)",
            "  category_json: a mapping of category name to a list of *",
            "  tool_routing: a list of {name, prompt, expected_tools} (items have no `prompt`)",
            "  conversation_job: a mapping with `evaluator:` *",
            "rename it so it does not match `agent_eval_files`, or give it one of these shapes "
            "(see docs/reference/formats.md)",
        ]
    )


def test_a_file_that_fits_several_formats_says_which(pytester: pytest.Pytester) -> None:
    answering(pytester, {})
    pytester.makeconftest(
        """
from pytest_agent_eval.cases.load import Dialect
from pytest_agent_eval.cases.dialects import golden_set

def pytest_agent_eval_register_dialects(registry):
    registry.register(Dialect("my_golden", golden_set.detect, golden_set.load))
"""
    )
    pytester.makefile(
        ".json", eval_both=json.dumps([{"id": "a", "input": "hi", "expected_contains": ["hi"]}])
    )
    result = run_evals(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_both.json:1: file fits several formats (golden_set, my_golden); make "
            "its shape unambiguous"
        ]
    )


def test_a_conversation_job_with_a_bad_task_errors_at_its_line_and_the_rest_runs(
    pytester: pytest.Pytester,
) -> None:
    answering(pytester, {"hi": ["hello", []]})
    pytester.makefile(
        ".yaml",
        eval_job="# job\nevaluator:\n  name: Socrates\naspirationalAverage: 3000\ntasks:\n"
        "  - {type: task, task: x}\n",
        eval_other="cases:\n  - {id: a, input: hi}\n",
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["eval_job.yaml:6: tasks[0]: missing `acceptanceCriteria` (how the task is scored)"]
    )


EXPECTED_SEED_FORMATS = {
    "dyno-agent/agent_decisions_v1.0.0.json": ("golden_set", 17),
    "dyno-agent/agent_qa_v1.0.0.json": ("golden_set", 13),
    "dyno-agent/agent_qa_v1.0.0.HEAD-expected-key-variant.json": ("golden_set", 13),
    "kortix/test_cases.json": ("category_json", 20),
    "forager/eval_cases.json": ("tool_routing", 4),
    "neon/simple-suite.yaml": ("neon_suite", 3),
    "neon/demo-suite.yaml": ("neon_suite", 12),
    "neon/integration-fixture-test-suite.yaml": ("neon_suite", 2),
    "neon/integration-fixture-failing-suite.yaml": ("neon_suite", 1),
}


@pytest.mark.skipif(not SEED_DATA.is_dir(), reason=f"seed data not available: {SEED_DATA}")
def test_every_seed_file_loads_as_its_home_format() -> None:
    """Every real file of the original projects: eval files load cleanly; others are told apart."""
    checks, dialects = builtin_registry(), builtin_dialects()
    seen = {}
    for path in sorted(SEED_DATA.rglob("*")):
        if not path.is_file():
            continue
        name = path.relative_to(SEED_DATA).as_posix()
        try:
            loaded = load_file(path, checks, dialects)
        except EvalFileError as exc:
            seen[name] = exc.message.split(";")[0]
            continue
        assert [c.error for c in loaded.cases if c.error] == [], name
        seen[name] = (loaded.dialect, len(loaded.cases))
    assert seen == {
        **EXPECTED_SEED_FORMATS,
        "embabel/readme-example-job.yml": ("conversation_job", 2),
        # canned responses, not cases
        "forager/mock_tool_responses.json": "not an eval file of any known format",
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("eval_d.yaml", "cases:\n  - {id: a, input: x}\n  - {id: a, input: y}\n"),
        ("eval_d.json", '[\n{"id": "a", "input": "x", "expected_contains": ["x"]},\n'
         '{"id": "a", "input": "y", "expected_contains": ["y"]}\n]'),
    ],
)  # fmt: skip
def test_every_format_reports_a_duplicate_case_id_alike(
    tmp_path: Path, name: str, text: str
) -> None:
    """One id dedup for all formats: a repeat errors as `<id>-line<N>`, naming it and the first."""
    (tmp_path / name).write_text(text)
    first, second = load_file(tmp_path / name, builtin_registry(), builtin_dialects()).cases
    assert (first.id, first.error) == ("a", None)
    assert second.id == "a-line3"
    assert second.error == (
        f"{tmp_path / name}:3: duplicate case id 'a' (first at line 2); give each case a "
        "unique `id` (case a-line3)"
    )


def test_the_dialect_contract_has_one_home_and_its_old_import_path_still_works() -> None:
    import pytest_agent_eval
    from pytest_agent_eval.cases import load
    from pytest_agent_eval.cases.dialects import Dialect, native

    assert load.Dialect is Dialect is pytest_agent_eval.Dialect
    assert native.DIALECT.fallback and native.DIALECT.name == "native"
    assert builtin_dialects().names()[0] == "native"


DATA: list[object] = [
    {},
    [],
    "text",
    {"cases": []},
    {"cases": [{"id": "a", "input": "q"}]},
    {"agent_id": "m:f", "cases": [{"name": "n", "input": {"query": "q"}}]},
    {"cases": [{"name": "n", "input": {"query": "q"}}]},
    [{"id": "a", "input": "q", "expected": "x"}],
    [{"input": "q", "expected_output": "x"}],
    [{"inputs": {"q": 1}, "outputs": {"a": 2}}],
    {"math": [{"input": "1+1", "expected": "2"}]},
    [{"name": "n", "prompt": "p", "expected_tools": ["t"]}],
    {"evaluator": {"name": "e"}, "tasks": []},
    {"providers": ["p"], "prompts": ["x"], "tests": []},
]


@pytest.mark.parametrize("data", DATA, ids=[json.dumps(shape)[:40] for shape in DATA])
def test_a_format_is_imported_for_every_file_its_detect_accepts(data: object) -> None:
    """The quick test that decides whether a format's module loads passes all that fits it."""
    import importlib

    from pytest_agent_eval.cases.load import BUILTIN

    for name, may_fit in BUILTIN:
        dialect = importlib.import_module(f"pytest_agent_eval.cases.dialects.{name}").DIALECT
        assert dialect.name == name
        assert may_fit(data) or not dialect.detect(data)[0], name
