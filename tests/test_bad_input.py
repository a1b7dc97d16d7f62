"""Bad input (SPEC §13): one `path:line` message each, no INTERNALERROR, other files still run."""

from __future__ import annotations

import pytest

GOOD = (
    "agent: scripted:run\ncases:\n"
    "  - {id: fine, input: a, context: {say: ok}, expect: {contains: [ok]}}\n"
)


def run_with(evals: pytest.Pytester, **files: str) -> pytest.RunResult:
    evals.makefile(".yaml", eval_good=GOOD)
    for name, text in files.items():
        suffix = ".json" if name.endswith("_json") else ".yaml"
        evals.makefile(suffix, **{name.removesuffix("_json"): text})
    result = evals.runpytest()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*eval_good.yaml*"])
    return result


def shows(result: pytest.RunResult, *messages: str) -> None:
    """Each message is printed on a line of its own (literal text, no glob)."""
    lines = result.stdout.lines
    for message in messages:
        assert any(line.strip() == message for line in lines), (
            f"{message!r} not printed:\n{result.stdout.str()}"
        )


def test_yaml_syntax_error(evals: pytest.Pytester) -> None:
    result = run_with(
        evals, eval_bad="agent: scripted:run\ncases:\n  - id: a\n    input: [unclosed\n  - id: b\n"
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*eval_bad.yaml:5: YAML syntax error: *; fix the YAML syntax"])


def test_json_syntax_error(evals: pytest.Pytester) -> None:
    result = run_with(
        evals, eval_bad_json='{\n  "cases": [\n    {"id": "a", "input": "x",}\n  ]\n}\n'
    )
    result.assert_outcomes(passed=1, errors=1)
    # Python's own wording: "Expecting property name ..." up to 3.12, "Illegal trailing comma ..."
    # from 3.13
    result.stdout.re_match_lines(
        [
            r".*eval_bad.json:3: JSON syntax error: (Expecting property name|Illegal trailing "
            r"comma).*; fix the JSON syntax"
        ]
    )


def test_schema_error_in_one_case_keeps_the_others(evals: pytest.Pytester) -> None:
    result = run_with(
        evals,
        eval_schema="""\
agent: scripted:run
cases:
  - {id: ok_one, input: a, context: {say: ok}}
  - id: bad_repeat
    input: a
    repeat: zero
  - {id: ok_two, input: a, context: {say: ok}}
""",
    )
    result.assert_outcomes(passed=3, errors=1)
    shows(
        result,
        "eval_schema.yaml:6: cases[1].repeat: 'zero' is not of type 'integer' (case bad_repeat)",
    )


def test_file_level_schema_error(evals: pytest.Pytester) -> None:
    result = run_with(evals, eval_schema="agent: scripted:run\ntags: routing\ncases: []\n")
    result.assert_outcomes(passed=1, errors=1)
    shows(result, "eval_schema.yaml:2: tags: 'routing' is not of type 'array'")


def test_unknown_key_says_did_you_mean(evals: pytest.Pytester) -> None:
    result = run_with(
        evals,
        eval_typo="""\
agent: scripted:run
cases:
  - id: typo
    input: a
    expct: {contains: [a]}
  - id: check_typo
    input: a
    expect:
      tool_called: [search]
""",
    )
    result.assert_outcomes(passed=1, errors=2)
    shows(
        result,
        "eval_typo.yaml:5: unknown key 'expct' in cases[0] (did you mean \"expect\"?) (case typo)",
        "eval_typo.yaml:9: unknown check 'tool_called' in cases[1].expect (did you mean "
        '"tools_called"?) (case check_typo)',
    )


def test_http_agent_mapping_typo_says_did_you_mean(evals: pytest.Pytester) -> None:
    """Before, every mistake in an HTTP agent mapping read "… is not of type 'string'".

    That is the first form of `agent`.
    """
    result = run_with(
        evals,
        eval_http="""\
agent: {url: "http://127.0.0.1:9/chat", header: {X-Key: abc}}
cases:
  - {id: a, input: hi}
""",
        eval_http_case="""\
cases:
  - id: numbers
    agent: {url: "http://127.0.0.1:9/chat", headers: {X-Key: 1}}
    input: hi
  - id: neither
    agent: scripted
    input: hi
""",
        eval_http_matrix="""\
agents:
  local: scripted:run
  served: {url: "http://127.0.0.1:9/chat", timout: 5}
cases:
  - {id: a, input: hi}
""",
    )
    result.assert_outcomes(passed=1, errors=4)
    shows(
        result,
        "eval_http.yaml:1: unknown key 'header' in agent (did you mean \"headers\"?)",
        "eval_http_case.yaml:3: cases[0].agent.headers.X-Key: 1 is not of type "
        "'string' (case numbers)",
        "eval_http_case.yaml:6: cases[1].agent: 'scripted' is not an agent: give "
        "`module:attribute`, the agent's http(s) URL, or a mapping {url, headers, body, output, "
        "session, timeout} (case neither)",
        "eval_http_matrix.yaml:3: unknown key 'timout' in agents.served (did "
        'you mean "timeout"?)',
    )


def test_duplicate_id(evals: pytest.Pytester) -> None:
    result = run_with(
        evals,
        eval_dup="""\
agent: scripted:run
cases:
  - {id: same, input: a, context: {say: ok}}
  - {id: same, input: b, context: {say: ok}}
""",
    )
    result.assert_outcomes(passed=2, errors=1)
    shows(
        result,
        "eval_dup.yaml:4: duplicate case id 'same' (first at line 3); give each case a unique "
        "`id` (case same-line4)",
    )


def test_agent_path_that_does_not_import(evals: pytest.Pytester) -> None:
    result = run_with(
        evals,
        eval_imp="agent: no_such_module:run\ncases:\n  - {id: a, input: x}\n"
        "  - {id: b, input: y}\n",
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "eval_imp.yaml:1: agent 'no_such_module:run': cannot import module "
            "'no_such_module'*ModuleNotFoundError*"
        ]
    )


def test_agent_attribute_missing(evals: pytest.Pytester) -> None:
    result = run_with(evals, eval_attr="agent: scripted:nope\ncases:\n  - {id: a, input: x}\n")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["eval_attr.yaml:1: agent 'scripted:nope': module 'scripted' has no attribute 'nope'*"]
    )


def test_not_an_eval_file(evals: pytest.Pytester) -> None:
    result = run_with(evals, eval_other="just: a mapping\n")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*eval_other.yaml:1: not an eval file of any known format*"])


def test_loading_is_safe(evals: pytest.Pytester) -> None:
    result = run_with(evals, eval_unsafe="!!python/object/apply:os.system ['echo pwned']\n")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*eval_unsafe.yaml:1: YAML syntax error: *could not determine a constructor*"]
    )
    assert "pwned" not in result.stdout.str()


def test_weight_and_mock_form_typos_error_their_case_at_collection(evals: pytest.Pytester) -> None:
    """Before, the weight was ignored and the mapping answered literally (or failed once run)."""
    result = run_with(
        evals,
        eval_typos="""\
agent: scripted:run
cases:
  - id: weighted
    input: a
    weights: {contians: 3}
    expect: {contains: [a]}
  - id: mocked
    input: a
    tool_mocks:
      search: {sequnce: [a, b]}
  - {id: fine_too, input: a, context: {say: ok}}
""",
    )
    result.assert_outcomes(passed=2, errors=2)
    shows(
        result,
        "eval_typos.yaml:5: weights: unknown check 'contians' (did you mean \"contains\"?); a "
        "weight names a check of `expect` (case weighted)",
        "eval_typos.yaml:10: tool_mocks.search: unknown response form 'sequnce' (did you mean "
        "'sequence'?); to answer with this mapping as it is, write {return: {...}} (case mocked)",
    )


def test_a_json_file_with_a_schema_key_runs_as_native(evals: pytest.Pytester) -> None:
    result = run_with(
        evals,
        eval_editor_json='{"$schema": "./native.schema.json", "agent": "scripted:run",\n'
        ' "cases": [{"id": "a", "input": "x", "context": {"say": "ok"}, "expect": '
        '{"contains": ["ok"]}}]}\n',
    )
    result.assert_outcomes(passed=2)
