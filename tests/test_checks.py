"""Every check of SPEC §4 (but judge) passes and fails as a user sees it: outcome, failure text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from agent_sources import SCRIPTED_AGENT
from shared_run import OTHER_PLUGINS_OFF

# (check, passing case body, failing case body, fragments the failure text must contain)
CASES: list[tuple[str, str, str, list[str]]] = [
    (
        "contains",
        "context: {say: 'The Python 3.13 release is out'}\n    expect: {contains: [python 3.13]}",
        "context: {say: 'The Python 3.12 release is out'}\n"
        "    expect: {contains: [Python 3.13 release]}",
        ["expected: ['Python 3.13 release']", "missing 'Python 3.13 release'",
         "output: The Python 3.12 release is out", "closest: 'python'"],
    ),
    (
        "contains_case_sensitive",
        "context: {say: 'Python'}\n    expect: {contains: [Python], case_sensitive: true}",
        "context: {say: 'python'}\n    expect: {contains: [Python], case_sensitive: true}",
        ["expected: ['Python']", "output: python"],
    ),
    (
        "contains_any",
        "context: {say: 'refund approved'}\n    expect: {contains_any: [approved, granted]}",
        "context: {say: 'refund pending'}\n    expect: {contains_any: [approved, granted]}",
        ["expected: ['approved', 'granted']", "actual:   none found", "output: refund pending"],
    ),
    (
        "not_contains",
        "context: {say: 'All fine'}\n    expect: {not_contains: [\"I don't know\"]}",
        "context: {say: \"Well, I don't know that\"}\n"
        "    expect: {not_contains: [\"I don't know\"]}",
        ["expected: none of [\"I don't know\"]", "found \"I don't know\"",
         "output: Well, I don't know that"],
    ),
    (
        "regex",
        "context: {say: 'Order A123 shipped'}\n    expect: {regex: 'A\\d{3}'}",
        "context: {say: 'Order shipped'}\n    expect: {regex: 'A\\d{3}'}",
        ["expected: /A\\d{3}/", "actual:   no match", "output: Order shipped"],
    ),
    (
        "not_regex",
        "context: {say: 'all fine'}\n    expect: {not_regex: 'error \\d+'}",
        "context: {say: 'got error 42 here'}\n    expect: {not_regex: 'error \\d+'}",
        ["expected: no match of /error \\d+/", "actual:   error 42"],
    ),
    (
        "equals",
        "context: {say: '  4  '}\n    expect: {equals: '4'}",
        "context: {say: '14'}\n    expect: {equals: '4'}",
        ["expected: 4", "actual:   14"],
    ),
    (
        "tools_called",
        "context: {calls: [search, fetch]}\n    expect: {tools_called: [search]}",
        "context: {calls: [fetch]}\n    expect: {tools_called: [search]}",
        ["not called: search", "expected: ['search']", "actual:   ['fetch']"],
    ),
    (
        "tools_not_called",
        "context: {calls: [search]}\n    expect: {tools_not_called: [delete]}",
        "context: {calls: [search, delete]}\n    expect: {tools_not_called: [delete]}",
        ["called: delete", "expected: none of ['delete']", "actual:   ['search', 'delete']"],
    ),
    (
        "tools_exactly",
        "context: {calls: [b, a, a]}\n    expect: {tools_exactly: [a, b]}",
        "context: {calls: [a, c]}\n    expect: {tools_exactly: [a, b]}",
        ["not called: b; unexpected: c", "expected: ['a', 'b']", "actual:   ['a', 'c']"],
    ),
    (
        "tools_exactly_none",
        "context: {calls: []}\n    expect: {tools_exactly: []}",
        "context: {calls: [search]}\n    expect: {tools_exactly: []}",
        ["unexpected: search", "expected: []", "actual:   ['search']"],
    ),
    (
        "tool_sequence",
        "context: {calls: [search, fetch]}\n    expect: {tool_sequence: [search, fetch]}",
        "context: {calls: [search, summarize, fetch]}\n"
        "    expect: {tool_sequence: [search, fetch]}",
        ["calls differ at position 2", "expected: ['search', 'fetch']",
         "actual:   ['search', 'summarize', 'fetch']", "expected    actual",
         "1. search      search()",
         "2. -         + summarize()", "3. fetch       fetch()"],
    ),
    (
        "tools_in_order",
        "context: {calls: [a, x, b, y, c]}\n    expect: {tools_in_order: [a, b, c]}",
        "context: {calls: [b, a, c]}\n    expect: {tools_in_order: [a, b, c]}",
        ["'b' not called after ['a']", "expected: ['a', 'b', 'c']", "actual:   ['b', 'a', 'c']"],
    ),
    (
        "max_tool_calls",
        "context: {calls: [a, b]}\n    expect: {max_tool_calls: 2}",
        "context: {calls: [a, b, c]}\n    expect: {max_tool_calls: 2}",
        ["3 tool calls, at most 2 allowed", "expected: <= 2", "actual:   3"],
    ),
    (
        "tool_args",
        "context: {calls: [{name: fetch, args: {thread_id: abc123, opts: {depth: 2, x: 1}}}]}\n"
        "    expect: {tool_args: {fetch: {thread_id: abc123, opts: {depth: 2}}}}",
        "context: {calls: [{name: fetch, args: {thread_id: abc124, opts: {depth: 3}}}]}\n"
        "    expect: {tool_args: {fetch: {thread_id: abc123, opts: {depth: 2}}}}",
        ["arguments differ for fetch", "fetch.thread_id: expected 'abc123', got 'abc124'",
         "fetch.opts.depth: expected 2, got 3", "1. fetch(thread_id='abc124', opts={'depth': 3})"],
    ),
    (
        "tools_only",
        "context: {calls: [search, fetch, search]}\n    expect: {tools_only: [search, fetch]}",
        "context: {calls: [search, delete_order, fetch]}\n"
        "    expect: {tools_only: [search, fetch]}",
        ["1 call(s) of other tools: delete_order", "expected: only ['fetch', 'search']",
         "2. delete_order()"],
    ),
    (
        "tools_only_none",
        "context: {calls: []}\n    expect: {tools_only: []}",
        "context: {calls: [search]}\n    expect: {tools_only: []}",
        ["1 call(s) of other tools: search", "expected: no tool call"],
    ),
    (
        "tool_counts",
        "context: {calls: [search, search, fetch]}\n"
        "    expect: {tool_counts: {search: 2, fetch: {min: 1, max: 2}}}",
        "context: {calls: [search, fetch, fetch, fetch]}\n"
        "    expect: {tool_counts: {search: 2, fetch: {min: 1, max: 2}}}",
        ["search: called once, expected exactly 2 times; fetch: called 3 times, "
         "expected 1 to 2 times",
         "actual:   {'fetch': 3, 'search': 1}"],
    ),
    (
        "tool_call",
        "context: {calls: [{name: pay, args: {amount: 5, meta: {trace_id: t1}}}, {name: pay, "
        "args: {amount: 9}}]}\n"
        "    expect: {tool_call: {name: pay, args: {amount: 5}, match: exact, ignore: "
        "[meta], occurrence: first}}",
        "context: {calls: [{name: pay, args: {amount: 5, currency: EUR, meta: {trace_id: t1}}}]}\n"
        "    expect: {tool_call: {name: pay, args: {amount: 5, meta: {trace_id: "
        "x}}, match: exact,\n"
        "                         ignore: [meta.trace_id], occurrence: first}}",
        ["pay (first call): arguments differ (exact match)",
         "1. pay(amount=5, currency='EUR', meta={'trace_id': 't1'})",
         "pay.currency: unexpected (got 'EUR')"],
    ),
    (
        "tool_call_occurrence",
        "context: {calls: [{name: pay, args: {amount: 1}}, {name: pay, args: "
        "{amount: 2, note: x}}]}\n"
        "    expect: {tool_call: {name: pay, args: {amount: 2}, occurrence: 2}}",
        "context: {calls: [{name: pay, args: {amount: 1}}, {name: pay, args: {amount: 2}}]}\n"
        "    expect: {tool_call: {name: pay, args: {amount: 2}, occurrence: 1}}",
        ["pay (call 1): arguments differ", "1. pay(amount=1)", "pay.amount: expected 2, got 1"],
    ),
    (
        "tool_sequence_steps",
        "context: {calls: [{name: search, args: {q: tea, n: 3}}, {name: fetch, args: {id: 7}}]}\n"
        "    expect: {tool_sequence: [{name: search, args: {q: tea}}, fetch]}",
        "context: {calls: [{name: search, args: {q: coffee}}, {name: fetch, args: {id: 7}}]}\n"
        "    expect: {tool_sequence: [{name: search, args: {q: tea}}, fetch]}",
        ["arguments differ at step 1", "1. search(q='coffee')",
         "search.q: expected 'tea', got 'coffee'"],
    ),
    (
        "max_repeated_calls",
        "context: {calls: [{name: get, args: {id: 1, v: 2}}, {name: get, args: {v: 2, id: 1}},\n"
        "                  {name: get, args: {id: 2}}]}\n"
        "    expect: {max_repeated_calls: 2}",
        "context: {calls: [{name: get, args: {id: 1, v: 2}}, {name: get, args: {v: 2, id: 1}},\n"
        "                  {name: get, args: {id: 1, v: 2}}]}\n"
        "    expect: {max_repeated_calls: 2}",
        ["get(id=1, v=2) made 3 times, at most 2 allowed", "expected: each call at most 2 times",
         "actual:   3"],
    ),
    (
        "failed_calls_ignore",
        "context: {calls: [{name: search, error: 'TimeoutError: slow'}, search]}\n"
        "    expect: {tool_counts: {search: 1}, failed_calls: ignore}",
        "context: {calls: [{name: search, error: 'TimeoutError: slow'}, search]}\n"
        "    expect: {tool_counts: {search: 1}}",
        ["search: called 2 times, expected exactly once"],
    ),
    (
        "outcome_success",
        "context: {say: 'Room booked successfully'}\n    expect: {outcome: success}",
        "context: {say: 'The room was not found'}\n    expect: {outcome: success}",
        ["expected: success", "reads as failure ('not found')"],
    ),
    (
        "outcome_unavailable",
        "context: {say: 'That slot is unavailable'}\n    expect: {outcome: failure}",
        "context: {say: 'That slot is unavailable'}\n    expect: {outcome: success}",
        ["expected: success", "reads as failure ('unavailable')"],
    ),
    (
        "outcome_custom_words",
        "context: {say: 'Ticket filed'}\n"
        "    expect: {outcome: {expected: success, success_words: [filed]}}",
        "context: {say: 'Ticket parked'}\n"
        "    expect: {outcome: {expected: success, success_words: [filed]}}",
        ["expected: success", "reads as unclear"],
    ),
    (
        "max_latency_s",
        "context: {say: fast}\n    expect: {max_latency_s: 5}",
        "context: {say: slow, sleep: 0.2}\n    expect: {max_latency_s: 0.05}",
        ["expected: <= 0.05 s", "limit 0.05 s"],
    ),
    (
        "output_schema",
        "context: {say: '{\"status\": \"ok\", \"n\": 1}'}\n"
        "    expect: {output_schema: {type: object, required: [status], properties: "
        "{n: {type: integer}}}}",
        "context: {say: '{\"n\": \"one\"}'}\n"
        "    expect: {output_schema: {type: object, required: [status], properties: "
        "{n: {type: integer}}}}",
        ["2 schema error(s)", "'status' is a required property",
         "at $['n']: 'one' is not of type 'integer'",
         "actual:   {'n': 'one'}"],
    ),
    (
        "custom",
        "context: {say: 'short answer'}\n    expect: {custom: [checks_mod:short]}",
        "context: {say: 'a very long answer that goes on and on'}\n"
        "    expect: {custom: [checks_mod:short]}",
        ["checks_mod:short: 9 words, at most 5", "expected: ['checks_mod:short']"],
    ),
]  # fmt: skip

CUSTOM_CHECKS = """
def short(run):
    words = len(run.output.split())
    return words <= 5, f"{words} words, at most 5"
"""


@pytest.fixture(scope="module")
def check_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One real pytest run (a subprocess) over a file with every check's cases.

    A run per check would be slow.
    """
    path = tmp_path_factory.mktemp("checks")
    (path / "scripted.py").write_text(SCRIPTED_AGENT)
    (path / "checks_mod.py").write_text(CUSTOM_CHECKS)
    body = "agent: scripted:run\ncases:\n"
    for name, good, bad, _ in CASES:
        body += (
            f"  - id: {name}-pass\n    input: q\n    {good}\n  - id: {name}-fail\n    "
            f"input: q\n    {bad}\n"
        )
    (path / "eval_checks.yaml").write_text(body)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rA",
            "--rootdir",
            str(path),
            str(path),
        ],
        cwd=path,
        env={**os.environ, "PYTEST_ADDOPTS": OTHER_PLUGINS_OFF},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout


def _section(output: str, case_id: str) -> str:
    """The failure section of one case in pytest's output."""
    match = re.search(rf"_+ {re.escape(case_id)} _+\n(.*?)(?=\n_{{3,}} |\n=+ )", output, re.S)
    assert match, f"no failure section for {case_id}"
    return match.group(1)


@pytest.mark.parametrize(
    ("name", "fragments"), [(c[0], c[3]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_check_passes_and_fails(check_run: str, name: str, fragments: list[str]) -> None:
    out = check_run
    assert re.search(rf"^PASSED eval_checks\.yaml::{name}-pass$", out, re.M)
    assert f"FAILED eval_checks.yaml::{name}-fail" in out
    assert f"FAILED eval_checks.yaml::{name}-pass" not in out
    section = _section(out, f"{name}-fail")
    assert section.splitlines()[0].startswith(f"case {name}-fail failed:")
    for fragment in fragments:
        assert fragment in section, f"{fragment!r} not in:\n{section}"
    assert re.search(rf"eval_checks\.yaml:\d+: {name}-fail$", section.rstrip())


def test_every_case_ran(check_run: str) -> None:
    assert f"{len(CASES)} failed, {len(CASES)} passed" in check_run


SPEC_CHECKS = {
    "contains", "contains_any", "not_contains", "regex", "not_regex", "equals", "tools_called",
    "tools_not_called", "tools_exactly", "tool_sequence", "tools_in_order", "max_tool_calls",
    "tool_args", "outcome", "max_latency_s", "output_schema", "judge", "custom",
    # SPEC §20
    "tools_only", "tool_counts", "tool_call", "max_repeated_calls",
}  # fmt: skip


def test_every_spec_check_but_judge_is_covered() -> None:
    from pytest_agent_eval.checks import builtin_registry

    covered = {
        re.sub(
            r"_(case_sensitive|none|success|unavailable|custom_words|occurrence|steps)$", "", c[0]
        )
        for c in CASES
    }
    assert covered == SPEC_CHECKS - {"judge"} | {"failed_calls_ignore"}
    assert set(builtin_registry().names()) >= SPEC_CHECKS


def test_a_case_with_nothing_scored_is_skipped_not_passed(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml",
        eval_unscored="""\
agent: scripted:run
cases:
  - {id: only_reasoning, input: q, expect: {reasoning: {}}}
  - {id: with_contains, input: q, context: {say: ok}, expect: {reasoning: {}, contains: [ok]}}
""",
    )
    result = evals.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1] eval_unscored.yaml:3: nothing scored (reasoning): *AGENT_EVAL_LLM_MODEL*"]
    )


def test_checks_registered_by_a_sub_directory_conftest(evals: pytest.Pytester) -> None:
    """The root's eval file is read before `sub/conftest.py` loads; sub's check still reaches it."""
    evals.makefile(
        ".yaml",
        eval_a="agent: scripted:run\ncases:\n  - {id: root, input: q, context: {say: ok}}\n",
    )
    sub = evals.mkdir("sub")
    (sub / "conftest.py").write_text(
        "from pytest_agent_eval import CheckResult\n\n"
        "def shouts(run, spec, ctx):\n"
        "    return CheckResult.of('shouts', run.output.isupper() == spec, actual=run.output)\n\n"
        "def pytest_agent_eval_register_checks(registry):\n"
        "    registry.register('shouts', shouts, {'type': 'boolean'})\n"
    )
    (sub / "eval_b.yaml").write_text(
        "agent: scripted:run\ncases:\n"
        "  - {id: loud, input: q, context: {say: OK}, expect: {shouts: true}}\n"
        "  - {id: quiet, input: q, context: {say: ok}, expect: {shouts: true}}\n"
    )
    result = evals.runpytest("-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*eval_a.yaml::root PASSED*", "*sub/eval_b.yaml::loud PASSED*"])


def test_only_pure_built_in_checks_run_on_the_event_loop() -> None:
    """User code, LLM checks, checks of plugins (registered without saying) and regex run off-loop.

    Regex searches may wait on their helper process up to the case's timeout.
    """
    from pytest_agent_eval.checks import builtin_registry

    registry = builtin_registry()
    off_loop = {spec.name for spec in registry if spec.blocking}
    assert off_loop == {
        "custom",
        "judge",
        "grounding",
        "reasoning",
        "behavior",
        "regex",
        "not_regex",
        "promptfoo",
    }
    registry.register("plugin_check", lambda run, spec, ctx: None, {})  # type: ignore[arg-type,return-value]
    assert registry.blocking(["contains", "plugin_check"]) and not registry.blocking(
        ["contains", "tools_called"]
    )


FORECAST_SCHEMA = {
    "type": "object",
    "required": ["city", "high"],
    "properties": {"high": {"type": "integer"}},
}


@pytest.mark.parametrize(
    ("say", "passes", "lines"),
    [
        ('Here is the forecast:\n```json\n{"city": "Oslo", "high": 4}\n```\nEnjoy!', True, []),
        ('Notes:\n```\nnot JSON\n```\nThe data:\n```\n{"city": "Oslo", "high": 4}\n```', True, []),
        (
            'Two options:\n```json\n{"city": "Oslo"}\n```\nor\n```json\n'
            '{"city": "Bergen", "high": 9}\n```',
            False,
            [
                "*✗ output_schema: 1 schema error(s) in the first ```json block at line 2 of the "
                "output (fenced block 1 of 2)*",
                "*at $: 'high' is a required property",
            ],
        ),
        (
            'Here:\n```json\n{"city": "Oslo", "high": 4,}\n```',
            False,
            ["*✗ output_schema: the ```json block at line 2 of the output is not JSON: *"],
        ),
        (
            "Sunny, 4 degrees.",
            False,
            ["*✗ output_schema: output is not JSON and holds no fenced block of JSON: *"],
        ),
    ],
    ids=[
        "json_fence_after_a_sentence",
        "first_plain_fence_that_parses",
        "which_block",
        "bad_json_fence",
        "none",
    ],
)
def test_output_schema_reads_the_fenced_block(
    evals: pytest.Pytester, say: str, passes: bool, lines: list[str]
) -> None:
    """Before, only all-fenced output was unwrapped: a sentence before a block made it not JSON."""
    case = {
        "id": "forecast",
        "input": "q",
        "context": {"say": say},
        "expect": {"output_schema": FORECAST_SCHEMA},
    }
    evals.makefile(".json", eval_forecast=json.dumps({"agent": "scripted:run", "cases": [case]}))
    result = evals.runpytest()
    result.assert_outcomes(passed=int(passes), failed=int(not passes))
    result.stdout.fnmatch_lines(lines)


def test_validate_and_the_schema_know_the_trajectory_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agent_eval.cli import main

    good = tmp_path / "eval_good.yaml"
    good.write_text(
        "cases:\n  - id: c\n    input: q\n    reference: [20 EUR]\n    expect:\n"
        "      tools_only: [a]\n      tool_counts: {a: 1, b: {max: 2}}\n"
        "      max_repeated_calls: 1\n"
        "      tool_call: [{name: a, args: {x: 1}, match: exact, ignore: [meta.id], "
        "occurrence: last}]\n"
        "      tool_sequence: [{name: a, args: {x: 1}}, b]\n      failed_calls: ignore\n"
        "      judge: {reference: Paris}\n"
    )
    assert main(["validate", str(good)]) == 0
    bad = tmp_path / "eval_bad.yaml"
    bad.write_text(
        "cases:\n  - id: c\n    input: q\n    expect:\n"
        "      tool_call: {name: pay, match: fuzzy, occurrence: 0}\n"
        "      tool_counts: {a: {mn: 1}}\n"
        "      failed_calls: skip\n      max_repeated_calls: 0\n"
    )
    capsys.readouterr()
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    for problem in (
        "unknown key 'mn' in cases[0].expect.tool_counts.a (did you mean \"min\"?) (case c)",
        "cases[0].expect.tool_call.match: 'fuzzy' is not one of ['subset', 'exact'] (case c)",
        "cases[0].expect.failed_calls: 'skip' is not one of ['count', 'ignore'] (case c)",
        "cases[0].expect.max_repeated_calls: 0 is less than the minimum of 1 (case c)",
    ):
        assert problem in out, out
    shipped = json.loads(
        (Path(__file__).parents[1] / "pytest_agent_eval/cases/native.schema.json").read_text()
    )
    assert {"tools_only", "tool_counts", "tool_call", "max_repeated_calls", "failed_calls"} <= set(
        shipped["$defs"]["expect"]["properties"]
    )
    assert "reference" in shipped["$defs"]["case"]["properties"]


def test_the_families_table_names_what_each_family_registers() -> None:
    """The registry knows each built-in check by name before its family loads (issue 38)."""
    import importlib

    from pytest_agent_eval.checks import FAMILIES, SPAN_CHECKS, CheckRegistry

    for family, names in FAMILIES.items():
        own = CheckRegistry()
        importlib.import_module(f"pytest_agent_eval.checks.{family}").register(own)
        assert tuple(own.names()) == names, family
    assert set(FAMILIES["spans"]) == SPAN_CHECKS


def test_a_check_registered_over_a_built_in_one_stays_when_its_family_loads() -> None:
    """A plugin's `contains` replaces the built-in one, before or after `output` is imported."""
    from pytest_agent_eval.checks import builtin_registry

    def mine(run: object, spec: object, ctx: object) -> None:
        return None

    registry = builtin_registry()
    registry.register("contains", mine, {"type": "boolean"}, blocking=False)  # type: ignore[arg-type]
    assert registry["not_contains"].name == "not_contains"  # loads the output family
    assert registry["contains"].func is mine and registry["contains"].schema == {"type": "boolean"}
    assert not registry.need_no_loop(["contains"]) and registry.need_no_loop(["not_contains"])
    assert registry.names()[:3] == ["contains", "contains_any", "not_contains"]
    with pytest.raises(KeyError):
        registry["no_such_check"]


def test_a_plugins_family_of_checks_is_not_taken_for_a_built_in_one() -> None:
    """Registered by name after the built-in checks, a family's non-blocking checks get the loop."""
    from pytest_agent_eval.checks import FAMILIES, CheckRegistry, builtin_registry

    plugin = CheckRegistry()
    plugin.mark_builtin()
    plugin.register_family("pytest_agent_eval.checks.output", FAMILIES["output"])
    assert "contains" in plugin and not plugin.need_no_loop(["contains"])
    assert builtin_registry().need_no_loop(["contains"])
