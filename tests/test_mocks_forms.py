"""Tool mocks as users run them: each response form and `unmocked_tools` mode, pass and fail."""

from __future__ import annotations

import textwrap

import pytest

TOOLBOX = '''
def dispatch(name, args):
    """The real dispatch layer: only `clock` is harmless, anything else would touch the \
outside world."""
    if name == "clock":
        return "real clock: 12:00"
    raise RuntimeError(f"real tool {name} reached")

def echo(query, limit=1):
    return f"echo {query} x{limit}"

def run(query, context):
    """Calls the tools listed in the case's context; reports tool errors unless \
`let_raise` is set."""
    lines = []
    for call in context.get("calls", []):
        try:
            result = dispatch(call["name"], call.get("args", {}))
        except Exception as exc:
            if context.get("let_raise"):
                raise
            result = f"!! {type(exc).__name__}: {exc}"
        lines.append(f"{call['name']} -> {result}")
    return "\\n".join(lines) or "no tools"
'''


def run_evals(
    pytester: pytest.Pytester, cases: str, *args: str, header: str = ""
) -> pytest.RunResult:
    """Write `toolbox.py` and `eval_mocks.yaml` (agent and dispatcher are toolbox's), run pytest."""
    pytester.makepyfile(toolbox=TOOLBOX)
    pytester.syspathinsert()
    head = "agent: toolbox:run\ntool_dispatch: toolbox:dispatch\n" + textwrap.dedent(header)
    pytester.path.joinpath("eval_mocks.yaml").write_text(
        head + "cases:\n" + textwrap.indent(textwrap.dedent(cases), "  ")
    )
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


def line_of(pytester: pytest.Pytester, text: str, file: str = "eval_mocks.yaml") -> int:
    """The 1-based line of the eval file that contains ``text``."""
    lines = pytester.path.joinpath(file).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_literal_values(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: literal_pass
          input: {query: q, context: {calls: [{name: search, args: {q: python}}, \
{name: stats, args: {}}]}}
          tool_mocks:
            search: "3 results"
            stats: {return: {sequence: 1}}
          expect:
            contains: ["search -> 3 results", "stats -> {'sequence': 1}"]
            tool_args: {search: {q: python}}
        - id: literal_fail
          input: {query: q, context: {calls: [{name: search, args: {q: rust}}]}}
          tool_mocks: {search: "no results"}
          expect: {contains: ["3 results"]}
        """,
        "-v",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*case literal_fail failed: 1 of 1 checks failed*",
            "*✗ contains*",
            "  calls:",
            "*1. search(q='rust') -> 'no results'",
            "eval_mocks.yaml:*: literal_fail",
        ]
    )


def test_sequence_one_response_per_call_then_unmocked(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: sequence_pass
          input: {query: q, context: {calls: [{name: poll, args: {n: 1}}, {name: poll, \
args: {n: 2}}]}}
          tool_mocks: {poll: {sequence: [pending, {raise: "TimeoutError: slow"}]}}
          expect: {contains: ["poll -> pending", "poll -> !! TimeoutError: slow"]}
        - id: sequence_fail
          input: {query: q, context: {calls: [{name: poll}, {name: poll}, {name: poll, \
args: {n: 3}}]}}
          tool_mocks: {poll: {sequence: [pending, done]}}
          expect: {contains: ["poll -> done"]}
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    where = f"eval_mocks.yaml:{line_of(pytester, 'id: sequence_fail')}"
    result.stdout.fnmatch_lines(
        [
            "*case sequence_fail failed: *",
            "*✓ contains",
            f"*✗ unmocked tool call poll(n=3) in case sequence_fail ({where}): its `sequence` has "
            "2 responses and this is call 3; add a response under `tool_mocks:`*",
        ]
    )


def test_raise_builtin_types_and_others(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: raise_pass
          input: {query: q, context: {calls: [{name: fetch}, {name: pay}]}}
          tool_mocks:
            fetch: {raise: "TimeoutError: upstream"}
            pay: {raise: "PaymentDeclined: card expired"}
          expect:
            contains: ["fetch -> !! TimeoutError: upstream", \
"pay -> !! ToolMockError: PaymentDeclined: card expired"]
        - id: raise_fail
          input: {query: q, context: {let_raise: true, calls: [{name: fetch, args: {id: 7}}]}}
          tool_mocks: {fetch: {raise: "ConnectionError: reset by peer"}}
          expect: {contains: ["fetched"]}
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "case raise_fail failed: the agent failed, nothing was checked (score 0.00)",
            "  ✗ agent raised ConnectionError: reset by peer",
            "*File*toolbox.py*, in run",
        ]
    )


def test_when_and_default(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: when_pass
          input:
            query: q
            context:
              calls: [{name: weather, args: {city: Oslo, units: {temp: C}}}, {name: weather, \
args: {city: Rome}}]
          tool_mocks:
            weather:
              when:
                - args: {city: Oslo, units: {temp: C}}
                  return: "-3 C"
              default: "sunny"
          expect: {contains: ["weather -> -3 C", "weather -> sunny"]}
        - id: when_fail
          input: {query: q, context: {calls: [{name: weather, args: {city: Lima}}]}}
          tool_mocks:
            weather:
              when: [{args: {city: Oslo}, return: "-3 C"}]
          expect: {contains: ["weather"]}
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    where = f"eval_mocks.yaml:{line_of(pytester, 'id: when_fail')}"
    result.stdout.fnmatch_lines(
        [
            f"*✗ unmocked tool call weather(city='Lima') in case when_fail ({where}): no `when` "
            "entry matches these arguments and there is no `default`*"
        ]
    )


def test_call_a_function_with_the_arguments(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: call_pass
          input: {query: q, context: {calls: [{name: search, args: {query: py, limit: 2}}]}}
          tool_mocks: {search: {call: "toolbox:echo"}}
          expect: {contains: ["search -> echo py x2"]}
        - id: call_fail
          input: {query: q, context: {calls: [{name: search, args: {query: py}}]}}
          tool_mocks: {search: {call: "toolbox:no_such_responder"}}
          expect: {contains: ["echo"]}
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    where = f"eval_mocks.yaml:{line_of(pytester, 'id: call_fail')}"
    result.stdout.fnmatch_lines(
        [
            f"{where}: case call_fail: tool_mocks.search.call: module 'toolbox' has no attribute "
            "'no_such_responder'*"
        ]
    )


def test_strict_fails_the_case_even_when_the_agent_catches_the_error(
    pytester: pytest.Pytester,
) -> None:
    result = run_evals(
        pytester,
        """
        - id: strict_pass
          unmocked_tools: strict
          input: {query: q, context: {calls: [{name: search, args: {q: x}}]}}
          tool_mocks: {search: hits}
          expect: {contains: ["search -> hits"]}
        - id: strict_fail
          input:
            query: q
            context: {calls: [{name: search, args: {q: x}}, {name: refund, \
args: {order: A1, amount: 5}}]}
          tool_mocks: {search: hits}
          expect: {contains: ["search -> hits"]}
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    where = f"eval_mocks.yaml:{line_of(pytester, 'id: strict_fail')}"
    result.stdout.fnmatch_lines(
        [
            "case strict_fail failed: 1 of 2 checks failed (score 0.50)",
            "*✓ contains",
            f"*✗ unmocked tool call refund(order='A1', amount=5) in case strict_fail ({where}): "
            "`tool_mocks` has no response for 'refund'; add a response under `tool_mocks:` (in "
            "the case or the file's `defaults:`), or set `unmocked_tools: default` (canned "
            "answer) or `passthrough` (the real tool runs)",
        ]
    )
    assert "real tool refund reached" not in result.stdout.str()


def test_default_answers_with_a_canned_response(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: default_pass
          input: {query: q, context: {calls: [{name: weather, args: {city: Oslo}}]}}
          expect: {contains: ["weather -> Mock response for weather"]}
        - id: default_fail
          input: {query: q, context: {calls: [{name: weather, args: {city: Oslo}}]}}
          expect: {contains: ["-3 C"]}
        """,
        "-v",
        header="defaults: {unmocked_tools: default}\n",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*1. weather(city='Oslo') -> 'Mock response for weather'"])


def test_passthrough_runs_the_real_tool(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: passthrough_pass
          input: {query: q, context: {calls: [{name: clock}, {name: search, args: {q: x}}]}}
          tool_mocks: {search: hits}
          expect: {contains: ["clock -> real clock: 12:00", "search -> hits"]}
        - id: passthrough_fail
          input: {query: q, context: {let_raise: true, calls: [{name: weather, \
args: {city: Oslo}}]}}
          expect: {contains: ["sunny"]}
        """,
        header="defaults: {unmocked_tools: passthrough}\n",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["  ✗ agent raised RuntimeError: real tool weather reached"])


def test_ini_options_set_dispatch_mode_and_default_responses(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        agent_eval_tool_dispatch = toolbox:dispatch
        agent_eval_unmocked_tools = default
        agent_eval_tool_responses = mocks/responses.yaml
        """
    )
    pytester.mkdir("mocks").joinpath("responses.yaml").write_text(
        "search: from the ini file\nstats: '42'\n"
    )
    pytester.makepyfile(toolbox=TOOLBOX)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_ini="""
        agent: toolbox:run
        cases:
          - id: ini_defaults
            input: {query: q, context: {calls: [{name: search}, {name: stats}, {name: weather}]}}
            tool_mocks: {stats: "own"}
            expect: {contains: ["search -> from the ini file", "stats -> own", \
"weather -> Mock response for weather"]}
          - id: case_mode_wins
            unmocked_tools: strict
            input: {query: q, context: {calls: [{name: weather}]}}
            expect: {contains: [weather]}
        """,
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    where = f"eval_ini.yaml:{line_of(pytester, 'id: case_mode_wins', 'eval_ini.yaml')}"
    result.stdout.fnmatch_lines(
        [f"*✗ unmocked tool call weather() in case case_mode_wins ({where})*"]
    )


def test_bad_ini_settings_are_reported(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nagent_eval_unmocked_tools = lenient\n")
    result = pytester.runpytest("-p", "no:randomly")
    result.stderr.fnmatch_lines(
        ["*agent_eval_unmocked_tools = 'lenient': use one of strict, default, passthrough"]
    )
    pytester.makeini("[pytest]\nagent_eval_tool_responses = nowhere.yaml\n")
    result = run_evals(pytester, "- id: c\n  input: q\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*nowhere.yaml: agent_eval_tool_responses names a file that does not exist*"]
    )


def test_a_dispatcher_that_does_not_import_fails_with_the_case_location(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(toolbox=TOOLBOX)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_bad="""
        agent: toolbox:run
        tool_dispatch: toolbox:dispatch_tool
        cases:
          - id: c
            input: q
        """,
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    where = f"eval_bad.yaml:{line_of(pytester, 'id: c', 'eval_bad.yaml')}"
    result.stdout.fnmatch_lines(
        [
            f"{where}: the file's `tool_dispatch:` 'toolbox:dispatch_tool': "
            "toolbox:dispatch_tool: toolbox has no attribute 'dispatch_tool'"
        ]
    )
    assert "During handling" not in result.stdout.str()


SHOP = """
import pathlib

def refund(order):
    pathlib.Path("refunded.txt").write_text(order)  # the real side effect
    return "refunded"

def search(q):
    return "real search"

def run(query, context):
    return refund("A1")
"""


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_mocks_that_nothing_patches_fail_before_the_real_tool_runs(
    pytester: pytest.Pytester, concurrency: str
) -> None:
    pytester.makepyfile(shop=SHOP)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_unpatched="""
        agent: shop:run
        cases:
          - id: c
            input: q
            tool_mocks: {refund: ok}
        """,
    )
    result = pytester.runpytest("-p", "no:randomly", "--agent-eval-concurrency", concurrency)
    result.assert_outcomes(failed=1)
    where = f"eval_unpatched.yaml:{line_of(pytester, 'id: c', 'eval_unpatched.yaml')}"
    result.stdout.fnmatch_lines(
        [
            f"{where}: case c has tool_mocks for refund but no tool is patched, so the real tools "
            "would run; the agent was not called. Set `tool_dispatch: module:function` in the "
            "file (or ini agent_eval_tool_dispatch), or use the tool_mocks fixture (patch, "
            "patch_tool, wrap) in your `agent` fixture: tools must be patched or wrapped "
            "before the agent is called"
        ]
    )
    assert not pytester.path.joinpath("refunded.txt").exists()


def test_a_dispatcher_patched_for_other_files_does_not_count(pytester: pytest.Pytester) -> None:
    """With concurrency, cases started early keep the dispatcher patched: not this case's patch."""
    pytester.makepyfile(shop=SHOP + "\ndef dispatch(name, args):\n    raise RuntimeError('real')\n")
    pytester.syspathinsert()
    dispatched = "agent: toolbox:run\ntool_dispatch: shop:dispatch\ncases:\n"
    pytester.makepyfile(
        toolbox=TOOLBOX.replace("result = dispatch(", "result = shop.dispatch(") + "\nimport shop\n"
    )
    cases = "".join(
        f"  - {{id: a{n}, input: {{query: q, context: {{calls: [{{name: clock}}]}}}}, "
        "tool_mocks: {clock: t}}\n"
        for n in range(3)
    )
    pytester.makefile(
        ".yaml",
        eval_a=dispatched + cases,
        eval_b="agent: shop:run\ncases:\n  - {id: b1, input: q, tool_mocks: {refund: ok}}\n",
    )
    result = pytester.runpytest("-p", "no:randomly", "--agent-eval-concurrency", "4")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["eval_b.yaml:3: case b1 has tool_mocks for refund but no tool is patched*"]
    )
    assert not pytester.path.joinpath("refunded.txt").exists()


def test_tools_wrapped_only_inside_the_agent_call_are_too_late(pytester: pytest.Pytester) -> None:
    """Stand-ins made while the agent runs cannot be known before it runs.

    The case fails without calling it.
    """
    pytester.makepyfile(shop=SHOP)
    pytester.syspathinsert()
    pytester.makeconftest(
        """
        import pytest
        import shop

        @pytest.fixture
        def agent(tool_mocks):
            def run(query, context):
                return tool_mocks.wrap(shop.refund)("A1")
            return run
        """
    )
    pytester.makefile(
        ".yaml", eval_late="cases:\n  - id: c\n    input: q\n    tool_mocks: {refund: ok}\n"
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*tools must be patched or wrapped before the agent is called"])
    assert not pytester.path.joinpath("refunded.txt").exists()


def test_a_mock_of_a_tool_left_unwrapped_fails_before_the_agent_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(shop=SHOP)
    pytester.syspathinsert()
    pytester.makeconftest(
        """
        import pytest
        import shop

        @pytest.fixture
        def agent(tool_mocks):
            search = tool_mocks.wrap(shop.search)  # refund is left real
            return lambda query, context: search(query) + shop.refund("A1")
        """
    )
    pytester.makefile(
        ".yaml",
        eval_partly="""
        cases:
          - id: wrapped
            input: q
            tool_mocks: {search: hits}
            unmocked_tools: passthrough
            expect: {contains: [hitsrefunded]}
          - id: unwrapped
            input: q
            tool_mocks: {search: hits, refund: ok}
        """,
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    where = f"eval_partly.yaml:{line_of(pytester, 'id: unwrapped', 'eval_partly.yaml')}"
    result.stdout.fnmatch_lines(
        [
            f"{where}: case unwrapped: tool_mocks has a response for 'refund' but the agent has "
            "no mocked tool of that name; mocked tools: search; the agent was not called (tools "
            "must be patched or wrapped before it is)"
        ]
    )
    pytester.path.joinpath(
        "refunded.txt"
    ).unlink()  # written by `wrapped` (passthrough), not by `unwrapped`
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "eval_partly.yaml::unwrapped"
    )
    result.assert_outcomes(failed=1)
    assert not pytester.path.joinpath("refunded.txt").exists()


@pytest.mark.parametrize("mode", ["strict", "default"])
def test_a_mock_never_called_fails_the_case_with_did_you_mean(
    pytester: pytest.Pytester, mode: str
) -> None:
    result = run_evals(
        pytester,
        f"""
        - id: typo
          input: {{query: q, context: {{calls: [{{name: get_order, args: {{id: 7}}}}]}}}}
          unmocked_tools: {mode}
          tool_mocks: {{get_ordr: {{id: 7, status: shipped}}}}
        """,
    )
    result.assert_outcomes(failed=1)
    where = f"eval_mocks.yaml:{line_of(pytester, 'id: typo')}"
    result.stdout.fnmatch_lines(
        [
            "  ✗ tool_mocks: 'get_ordr' was mocked but never called (did you mean "
            f'"get_order"?); the agent called get_order (case typo, {where}); fix the name, '
            "remove the mock, or list the tool under `tools_not_called` if the "
            "agent must not call it"
        ]
    )
    if mode == "strict":  # the unmocked call says which mock was probably meant
        result.stdout.fnmatch_lines(
            ["*`tool_mocks` has no response for 'get_order' (did you mean \"get_ordr\"?)*"]
        )


TRAVEL_TOOLS = """
def search(query):
    return "REAL search: " + query

def weather(city):
    return "REAL weather in " + city

TOOLS = {"search": search}  # built at import: patch_tool("travel_tools:search") does not \
reach this entry

def run(query, context):
    if context.get("use") == "search":
        return TOOLS["search"](query)
    return "no tool needed"
"""


def test_a_patched_tool_the_agent_reaches_through_a_dict_is_named(
    pytester: pytest.Pytester,
) -> None:
    """Before: "the agent called no tool", though it called the real `search` via `TOOLS`."""
    pytester.makepyfile(travel_tools=TRAVEL_TOOLS)
    pytester.syspathinsert()
    pytester.makeconftest(
        """
import pytest
import travel_tools

@pytest.fixture
def agent(tool_mocks):
    tool_mocks.patch_tool("travel_tools:search")
    tool_mocks.patch_tool("travel_tools:weather")
    return travel_tools.run
"""
    )
    pytester.makefile(
        ".yaml",
        eval_travel="""\
cases:
  - id: via_dict
    input: {query: flights to Oslo, context: {use: search}}
    tool_mocks: {search: mocked hits}
  - id: no_call
    input: {query: hello, context: {}}
    tool_mocks: {weather: sunny}
""",
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.no_fnmatch_line("*the agent called no tool*")
    shown = result.stdout.lines
    for line in (
        "  ✗ tool_mocks: 'search' was mocked but never called: no call reached its stand-in; "
        "patch_tool('travel_tools:search') did not reach travel_tools.TOOLS['search'], which "
        "still holds the real tool: a call through it runs the real tool, unrecorded. Patch it "
        "too (monkeypatch.setitem(travel_tools.TOOLS, 'search', "
        "tool_mocks.wrap(travel_tools.TOOLS['search']))) or have the agent look the tool up when "
        "it calls it (case via_dict, eval_travel.yaml:2); fix the name, remove the mock, or list "
        "the tool under `tools_not_called` if the agent must not call it",
        "  ✗ tool_mocks: 'weather' was mocked but never called: no call reached its stand-in "
        "(either no tool was called, or one was called through a reference no patch reached: a "
        "dict, a list or a closure made before the patch) (case no_call, eval_travel.yaml:5); fix "
        "the name, remove the mock, or list the tool under `tools_not_called` if the "
        "agent must not call it",
    ):
        assert line in shown, f"{line!r} not in:\n{result.stdout.str()}"
    pytester.makeconftest(  # the fix the message gives
        """
import pytest
import travel_tools

@pytest.fixture
def agent(tool_mocks, monkeypatch):
    tool_mocks.patch_tool("travel_tools:search")
    monkeypatch.setitem(travel_tools.TOOLS, 'search', tool_mocks.wrap(travel_tools.TOOLS['search']))
    return travel_tools.run
"""
    )
    result = pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "eval_travel.yaml::via_dict"
    )
    result.assert_outcomes(passed=1)


def test_mocks_that_may_go_unused_do_not_fail(pytester: pytest.Pytester) -> None:
    """Spare mocks from `defaults`, safety nets for tools never to be called, passthrough cases."""
    result = run_evals(
        pytester,
        """
        - id: spare_default
          input: {query: q, context: {calls: [{name: clock}]}}
          tool_mocks: {clock: tick}
        - id: safety_net
          input: {query: q, context: {calls: [{name: clock}]}}
          tool_mocks: {clock: tick, refund: ok, cancel: ok}
          expect: {tools_not_called: [refund], tools_exactly: [clock]}
        - id: passthrough
          input: {query: q, context: {calls: [{name: clock}]}}
          unmocked_tools: passthrough
          tool_mocks: {get_ordr: x}
          expect: {contains: ["real clock"]}
        - id: own_unused
          input: {query: q, context: {calls: [{name: clock}]}}
          tool_mocks: {clock: tick, search: hits}
        """,
        header="defaults:\n  tool_mocks: {search: hits}\n",
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ tool_mocks: 'search' was mocked but never called; the agent called "
            "clock (case own_unused*"
        ]
    )


def test_an_agent_that_fails_early_is_not_blamed_for_mocks_it_never_reached(
    pytester: pytest.Pytester,
) -> None:
    result = run_evals(
        pytester,
        """
        - id: early_error
          input: {query: q, context: {let_raise: true, calls: [{name: fetch}, {name: search}]}}
          tool_mocks: {fetch: {raise: "ConnectionError: reset"}, search: hits}
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "case early_error failed: the agent failed, nothing was checked (score 0.00)",
            "  ✗ agent raised *",
        ]
    )
    result.stdout.no_fnmatch_line("*never called*")


def test_repeated_trials_each_record_their_own_calls(pytester: pytest.Pytester) -> None:
    """Trials of one case run at the same time (threads, concurrency 3).

    Each sees its own two calls, the fixture all six.
    """
    pytester.makepyfile(toolbox=TOOLBOX)
    pytester.syspathinsert()
    pytester.makeconftest(
        """
        import threading
        import pytest
        import toolbox

        barrier = threading.Barrier(3, timeout=10)

        @pytest.fixture
        def agent(tool_mocks, request):
            def run(query, context):
                toolbox.dispatch("first", {"thread": threading.get_ident()})
                barrier.wait()  # all three trials are in flight here
                toolbox.dispatch("second", {"thread": threading.get_ident()})
                return "done"
            yield run
            print("fixture saw", [c.name for c in tool_mocks.calls])
        """
    )
    pytester.makefile(
        ".yaml",
        eval_trials="""
        tool_dispatch: toolbox:dispatch
        cases:
          - id: trials
            input: q
            repeat: 3
            tool_mocks: {first: a, second: b}
            expect: {tool_sequence: [first, second], max_tool_calls: 2}
        """,
    )
    result = pytester.runpytest("-p", "no:randomly", "-s", "--agent-eval-concurrency", "3")
    result.assert_outcomes(passed=1)
    assert (
        "fixture saw ['first', 'second', 'first', 'second', 'first', 'second']"
        in result.stdout.str()
    )


def test_failing_tool_checks_show_the_calls_with_arguments_and_mock_responses(
    pytester: pytest.Pytester,
) -> None:
    result = run_evals(
        pytester,
        """
        - id: trajectory
          input: {query: q, context: {calls: [{name: search, args: {q: py}}, {name: fetch, \
args: {id: 7}}]}}
          tool_mocks:
            search: "3 results"
            fetch: {raise: "TimeoutError: slow"}
          expect:
            tool_sequence: [fetch, search]
            tools_in_order: [fetch, search]
        """,
    )
    result.assert_outcomes(failed=1)
    table = [
        "*calls:",
        "*1. search(q='py') -> '3 results'",
        "*2. fetch(id=7) raised TimeoutError: slow",
    ]
    # the calls once per case, after the checks, not under each failed tool check
    result.stdout.fnmatch_lines(
        ["*✗ tool_sequence: calls differ at position 1*", "*✗ tools_in_order*", *table]
    )
    assert result.stdout.str().count("calls:") == 1
