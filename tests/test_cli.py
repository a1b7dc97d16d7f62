"""`agent-eval validate` and `agent-eval schema` (SPEC §11), run as users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from pytest_agent_eval.cli import main

GOOD_NATIVE = "agent: pkg.mod:run\ncases:\n  - {id: a, input: hi, expect: {contains: [hi]}}\n"
GOOD_GOLDEN = json.dumps([{"id": "q1", "input": "hi", "expected_contains": ["hi"]}])


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["validate", *args])
    return code, capsys.readouterr().out.splitlines()


def test_valid_files_name_their_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "eval_native.yaml").write_text(GOOD_NATIVE)
    (tmp_path / "golden.json").write_text(GOOD_GOLDEN)
    code, out = validate(capsys, str(tmp_path / "eval_native.yaml"), str(tmp_path / "golden.json"))
    assert code == 0
    assert out == [
        f"{tmp_path}/eval_native.yaml: native, 1 case: ok",
        f"{tmp_path}/golden.json: golden_set, 1 case: ok",
        "2 files checked, 0 with problems (0 in all)",
    ]


def test_every_problem_is_printed_as_path_line_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "eval_suite.yaml"
    suite.write_text(
        """\
name: s
cases:
  - name: a
    input: {query: hi}
    scorers: [tool_selection, grounding, reasonning]
  - name: b
    input: {query: hi}
    expected_output_pattern: "[unclosed"
  - name: a
    input: {query: hi}
    expected_tools: []
  - name: c
    expected_tools: []
"""
    )
    native = tmp_path / "eval_native.yaml"
    native.write_text(
        "cases:\n  - {id: x, input: hi, expect: {regex: '(bad'}}\n  - {id: x, input: hi}\n"
    )
    code, out = validate(capsys, str(suite), str(native))
    assert code == 1
    assert out == [
        f"{suite}: neon_suite, 4 cases: 4 problems",
        f"{suite}:5: unknown scorer 'reasonning' in cases[0].scorers (did you mean "
        '"reasoning"?) (case a)',
        f"{suite}:8: cases[1].expected_output_pattern: bad regular expression '[unclosed': "
        "unterminated character set at position 0; fix the pattern (case b)",
        f"{suite}:9: duplicate case name 'a' (first at line 3); give each case a "
        "unique `name` (case a-2)",
        f"{suite}:12: cases[3]: missing `input` (`input: {{query: ...}}`) (case c)",
        f"{native}: native, 2 cases: 2 problems",
        f"{native}:2: cases[0].expect.regex: '(bad' is not a 'regex' (case x)",
        f"{native}:3: duplicate case id 'x' (first at line 2); give each case a "
        "unique `id` (case x-line3)",
        "2 files checked, 2 with problems (6 in all)",
    ]


def test_unknown_format_and_syntax_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "eval_broken.json").write_text('{"cases": [}')
    (tmp_path / "eval_odd.yaml").write_text("just: text\n")
    code, out = validate(capsys, str(tmp_path))  # a directory: the files pytest would collect
    assert code == 1
    assert out[0] == f"{tmp_path}/eval_broken.json: unreadable: 1 problem"
    assert out[1].startswith(f"{tmp_path}/eval_broken.json:1: JSON syntax error: ")
    assert out[2:4] == [
        f"{tmp_path}/eval_odd.yaml: unknown format: 1 problem",
        f"{tmp_path}/eval_odd.yaml:1: not an eval file of any known format; compared with:",
    ]
    assert out[-1] == "2 files checked, 2 with problems (2 in all)"


def test_a_directory_without_eval_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.yaml").write_text("a: 1\n")  # not matching eval_* / *.eval.*
    code, out = validate(capsys, str(tmp_path))
    assert (code, out) == (1, [f"agent-eval validate: no eval files found under {tmp_path}"])


POLITE_PLUGIN = (
    "def polite(run, spec, ctx):\n    return None\n\n"
    "def pytest_agent_eval_register_checks(registry):\n"
    "    registry.register('polite', polite, {'const': True})\n"
)


def test_plugins_add_checks_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "eval_custom.yaml").write_text(
        "cases:\n  - {id: a, input: hi, expect: {polite: true}}\n"
    )
    (tmp_path / "polite_checks.py").write_text(
        POLITE_PLUGIN
    )  # not a conftest.py: loaded with -p only
    code, out = validate(capsys, str(tmp_path / "eval_custom.yaml"))
    assert code == 1
    assert out[1].startswith(
        f"{tmp_path}/eval_custom.yaml:2: unknown check 'polite' in cases[0].expect"
    )
    code, out = validate(
        capsys, str(tmp_path / "eval_custom.yaml"), "-p", str(tmp_path / "polite_checks.py")
    )
    assert (code, out[0]) == (0, f"{tmp_path}/eval_custom.yaml: native, 1 case: ok")


def test_the_conftest_files_of_the_checked_files_add_their_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As pytest loads them: a check of the file's folder's conftest.py is known, with or w/o -p."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "eval_custom.yaml").write_text(
        "cases:\n  - {id: a, input: hi, expect: {polite: true}}\n"
    )
    (tmp_path / "sub" / "conftest.py").write_text(POLITE_PLUGIN)
    code, out = validate(capsys, str(tmp_path / "sub"))
    assert (code, out[0]) == (0, f"{tmp_path}/sub/eval_custom.yaml: native, 1 case: ok")
    code, out = validate(capsys, str(tmp_path / "sub"), "-p", str(tmp_path / "sub" / "conftest.py"))
    assert code == 0  # named again with -p: loaded once, not registered twice


def test_installed_pytest_plugins_add_their_checks(pytester: pytest.Pytester) -> None:
    """A ``pytest11`` entry-point plugin implementing the hook is loaded; still no pytest import."""
    site = pytester.mkdir("site")
    (site / "polite_plugin.py").write_text(POLITE_PLUGIN)
    info = site / "polite_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: polite-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npolite = polite_plugin\n")
    pytester.makefile(
        ".yaml", eval_custom="cases:\n  - {id: a, input: hi, expect: {polite: true}}\n"
    )
    script = (
        "import sys\nfrom pytest_agent_eval.cli import main\n"
        "code = main(['validate', 'eval_custom.yaml'])\n"
        "print('pytest imported:', 'pytest' in sys.modules)\nsys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=pytester.path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "eval_custom.yaml: native, 1 case: ok"
    assert "pytest imported: False" in done.stdout


def test_schema_prints_the_native_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    expect = schema["$defs"]["expect"]["properties"]
    assert {"contains", "tools_called", "judge", "tool_selection", "answer"} <= expect.keys()
    jsonschema.validate(
        {"cases": [{"id": "a", "input": "hi", "expect": {"contains": ["hi"]}}]}, schema
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"cases": [{"id": "a", "input": "hi", "expect": {"contain": ["hi"]}}]}, schema
        )


def test_the_console_script(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", eval_ok=GOOD_NATIVE)
    result = pytester.run("agent-eval", "validate", "eval_ok.yaml")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["eval_ok.yaml: native, 1 case: ok"])
    assert pytester.run("agent-eval", "validate", "missing.yaml").ret == 1


def test_duplicate_keys_are_reported_per_file_and_the_other_files_still_validated(
    pytester: pytest.Pytester,
) -> None:
    """Before, a duplicate key ended `agent-eval validate` in a traceback; later files unchecked."""
    pytester.makefile(".yaml", eval_a_dup="cases:\n  - id: a\n    input: hi\n    input: ho\n")
    pytester.makefile(
        ".json", eval_b_dup='{"cases": [\n  {"id": "b",\n   "input": "x",\n   "input": "y"}\n]}\n'
    )
    pytester.makefile(".yaml", eval_c_ok=GOOD_NATIVE)
    pytester.makefile(
        ".yaml", eval_d_typo="cases:\n  - {id: d, input: hi, expect: {contain: [hi]}}\n"
    )
    result = pytester.run("agent-eval", "validate", ".")
    assert result.ret == 1
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert result.stdout.lines == [
        "eval_a_dup.yaml: unreadable: 1 problem",
        "eval_a_dup.yaml:4: duplicate key 'input' (first at line 3); remove one",
        "eval_b_dup.json: unreadable: 1 problem",
        "eval_b_dup.json:4: duplicate key 'input' (first at line 3); remove one",
        "eval_c_ok.yaml: native, 1 case: ok",
        "eval_d_typo.yaml: native, 1 case: 1 problem",
        "eval_d_typo.yaml:2: unknown check 'contain' in cases[0].expect (did you mean "
        '"contains"?) (case d)',
        "4 files checked, 3 with problems (3 in all)",
    ]


def test_the_examples_validate() -> None:
    examples = Path(__file__).resolve().parents[1] / "examples"
    assert main(["validate", str(examples)]) == 0


def test_the_shipped_schema_file_is_what_schema_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """Editors read pytest_agent_eval/cases/native.schema.json; `agent-eval schema >` redoes it."""
    main(["schema"])
    shipped = (
        Path(__file__).resolve().parents[1] / "pytest_agent_eval" / "cases" / "native.schema.json"
    )
    assert shipped.read_text() == capsys.readouterr().out


def test_weights_mock_forms_and_check_options_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What would fail or be ignored at run time is a problem now, at its line, with the case id."""
    path = tmp_path / "eval_typos.yaml"
    path.write_text(
        """\
cases:
  - id: weighted
    input: q
    min_score: 0.5
    weights: {contians: 3, "turn 1: contains": 1}
    expect: {contains: [a]}
  - id: mocked
    input: q
    tool_mocks:
      search: {sequnce: [a, b]}
      stock: {count: 3}
      fetch: {when: [{args: {id: 1}, return: x}], defualt: y}
      price: {call: "shop.prices:lookup"}
  - id: options
    input: q
    expect:
      contains: [a]
      case_sensitiv: true
      judge: {rubric: r, min_scor: 0.5}
      reasoning: {min_step: 2}
"""
    )
    code, out = validate(capsys, str(path))
    assert code == 1
    assert out == [
        f"{path}: native, 3 cases: 6 problems",
        f"{path}:5: weights: unknown check 'contians' (did you mean \"contains\"?); a weight "
        "names a check of `expect` (case weighted)",
        f"{path}:10: tool_mocks.search: unknown response form 'sequnce' (did you mean "
        "'sequence'?); to answer with this mapping as it is, write {return: "
        "{...}} (case mocked)",
        f"{path}:12: tool_mocks.fetch: unknown key 'defualt' in a response form (did you mean "
        '"default"?); to answer with this mapping as it is, write {return: '
        "{...}} (case mocked)",
        f"{path}:18: unknown check 'case_sensitiv' in cases[2].expect (did you mean "
        '"case_sensitive"?) (case options)',
        f"{path}:19: unknown key 'min_scor' in cases[2].expect.judge (did you mean "
        '"min_score"?) (case options)',
        f"{path}:20: unknown key 'min_step' in cases[2].expect.reasoning (did you mean "
        '"min_steps"?) (case options)',
        "1 file checked, 1 with problems (6 in all)",
    ]


def test_a_json_file_may_name_its_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "eval_editor.json"
    path.write_text(
        json.dumps({"$schema": "./native.schema.json", "cases": [{"id": "a", "input": "hi"}]})
    )
    assert validate(capsys, str(path)) == (
        0,
        [f"{path}: native, 1 case: ok", "1 file checked, 0 with problems (0 in all)"],
    )


def test_a_conftest_imports_from_its_package_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As pytest imports a package's conftest.py: its imports start at the first non-package dir."""
    pkg = tmp_path / "proj" / "evals"
    pkg.mkdir(parents=True)
    (tmp_path / "proj" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "checks.py").write_text(POLITE_PLUGIN)
    (pkg / "conftest.py").write_text(
        "from proj.evals.checks import pytest_agent_eval_register_checks  # noqa\n"
    )
    (pkg / "eval_custom.yaml").write_text(
        "cases:\n  - {id: a, input: hi, expect: {polite: true}}\n"
    )
    code, out = validate(capsys, str(pkg))
    assert (code, out[0]) == (0, f"{pkg}/eval_custom.yaml: native, 1 case: ok")
