"""The tool-mock engine without the plugin layer: forms, modes, stand-ins, patching, concurrency."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.checks import builtin_registry
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import ToolCall
from pytest_agent_eval.mocks import (
    MockConfigError,
    MockPlan,
    ToolMockError,
    ToolMocks,
    UnmockedToolError,
    compile_response,
    load_responses,
    standins,
    wrap,
)
from pytest_agent_eval.run.agents import as_agent
from pytest_agent_eval.run.runner import run_case
from pytest_agent_eval.run.settings import RunSettings


def search(query: str, limit: int = 3, **opts: Any) -> str:
    """Search the web."""
    raise RuntimeError("the real search ran")


def plan(mocks: dict[str, Any], unmocked: str | None = None, **case: Any) -> MockPlan:
    return MockPlan.for_case(
        Case(id="c1", path=Path("evals/eval_x.yaml"), line=7, tool_mocks=mocks, **case),
        unmocked=unmocked,
    )


@pytest.fixture
def toolbox(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module `toolbox` whose dispatcher's real tools raise; an `agent` importing it by name."""
    module = types.ModuleType("toolbox")

    def dispatch(name: str, args: dict[str, Any]) -> str:
        if name == "clock":
            return "real clock: 12:00"
        raise RuntimeError(f"real tool {name} reached")

    module.dispatch = dispatch  # type: ignore[attr-defined]
    module.search = search  # type: ignore[attr-defined]
    module.fetch = lambda url: f"real page {url}"  # type: ignore[attr-defined]
    importer = types.ModuleType("toolbox_agent")
    importer.dispatch = dispatch  # type: ignore[attr-defined]  # `from toolbox import dispatch`
    monkeypatch.setitem(sys.modules, "toolbox", module)
    monkeypatch.setitem(sys.modules, "toolbox_agent", importer)
    return module


# -- response forms
# ---------------------------------------------------------------------------------


def test_each_response_form_answers_as_documented(toolbox: types.ModuleType) -> None:
    tool = wrap(search)
    forms = {
        "search": {
            "when": [
                {"args": {"query": "py", "opts": {"lang": "en"}}, "return": "english python"},
                {
                    "args": {"query": "py"},
                    "return": {"sequence": ["first py", {"raise": "TimeoutError: slow"}]},
                },
            ],
            "default": {"return": {"sequence": "not a form here"}},
        }
    }
    with plan(forms).record() as rec:
        assert tool("py", opts={"lang": "en", "extra": 1}) == "english python"
        assert tool("py") == "first py"
        with pytest.raises(TimeoutError, match="slow"):
            tool("py")
        assert tool("rust") == {"sequence": "not a form here"}
    assert [(c.args, c.result, c.error) for c in rec.calls] == [
        ({"query": "py", "opts": {"lang": "en", "extra": 1}}, "english python", None),
        ({"query": "py"}, "first py", None),
        ({"query": "py"}, None, "TimeoutError: slow"),
        ({"query": "rust"}, {"sequence": "not a form here"}, None),
    ]
    assert rec.violations == []


def test_call_form_gets_the_arguments_and_literals_are_fresh_copies(
    toolbox: types.ModuleType,
) -> None:
    toolbox.echo = lambda query, limit=3: f"echo {query} x{limit}"  # type: ignore[attr-defined]
    tool = wrap(search)
    with plan({"search": {"call": "toolbox:echo"}}).record():
        assert tool("a", limit=2) == "echo a x2"
    answer = {"hits": [1]}
    with plan({"search": answer}).record():
        tool("a")["hits"].append(2)
        assert tool("a") == {"hits": [1]}


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("TimeoutError: upstream", TimeoutError, "upstream"),
        ("ValueError", ValueError, ""),
        (
            "QuotaExceeded: 429 too many requests",
            ToolMockError,
            "QuotaExceeded: 429 too many requests",
        ),
        ("KeyboardInterrupt: no", ToolMockError, "KeyboardInterrupt: no"),
        ("the upstream is down", ToolMockError, "the upstream is down"),
    ],
)
def test_raise_uses_builtin_exception_types_only(
    text: str, kind: type[Exception], message: str
) -> None:
    with plan({"search": {"raise": text}}).record() as rec, pytest.raises(kind) as info:
        wrap(search)("q")
    assert str(info.value) == message
    assert rec.calls[0].error == (f"{kind.__name__}: {message}" if message else kind.__name__)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"sequence": "a"}, "tool_mocks.search.sequence: expected a non-empty list of responses"),
        (
            {"sequence": ["ok", {"raise": 3}]},
            "tool_mocks.search.sequence[1].raise: expected 'Type: message'",
        ),
        (
            {"when": [{"args": {"q": 1}}]},
            "tool_mocks.search.when[0]: expected {args: {...}, return: r}",
        ),
        (
            {"call": "toolbox:nope"},
            "tool_mocks.search.call: module 'toolbox' has no attribute 'nope'",
        ),
        ({"raise": "E", "default": "x"}, "mixes or misuses the response forms"),
        ({"default": "x"}, "mixes or misuses the response forms"),
        ({"sequnce": ["a"]}, "unknown response form 'sequnce' (did you mean 'sequence'?)"),
        (
            {"when": [{"args": {}, "return": 1}], "defualt": 2},
            "unknown key 'defualt' in a response form (did you mean",
        ),
        (
            {"when": [{"args": {}, "retrun": 1}]},
            "got {'args': {}, 'retrun': 1}; unknown key 'retrun' (did you mean",
        ),
    ],
)
def test_malformed_mocks_name_the_case_and_the_key(
    toolbox: types.ModuleType, raw: Any, error: str
) -> None:
    with pytest.raises(MockConfigError) as info:
        plan({"search": raw})
    assert str(info.value).startswith("evals/eval_x.yaml:7: case c1: tool_mocks.search")
    assert error in str(info.value)


def test_validation_checks_a_call_reference_without_importing_it() -> None:
    assert compile_response({"sequence": [{"call": "not.imported:f"}]}, "x", resolve=False)
    with pytest.raises(
        MockConfigError, match=r"x\.call: 'no_colon' is not a 'module:attribute' reference"
    ):
        compile_response({"call": "no_colon"}, "x", resolve=False)


def test_mappings_without_form_keys_are_literal_values() -> None:
    assert compile_response({"results": ["a"], "total": 1}, "x").value == {
        "results": ["a"],
        "total": 1,
    }  # type: ignore[union-attr]
    assert compile_response({"return": {"raise": "x"}}, "x").value == {"raise": "x"}  # type: ignore[union-attr]


# -- unmocked calls -------------------------------------------------------------------------------


def test_strict_raises_and_records_a_violation_naming_tool_args_and_location() -> None:
    with (
        plan({}).record() as rec,
        pytest.raises(UnmockedToolError, match="no mock response for tool 'search'"),
    ):
        wrap(search)("py", limit=1)
    assert rec.violations == [
        "unmocked tool call search(query='py', limit=1) in case c1 (evals/eval_x.yaml:7): "
        "`tool_mocks` has no response for 'search'; add a response under `tool_mocks:` (in the "
        "case or the file's `defaults:`), or set `unmocked_tools: default` (canned answer) or "
        "`passthrough` (the real tool runs)"
    ]
    assert rec.calls[0].error is not None and rec.calls[0].error.startswith("UnmockedToolError")


def test_used_up_sequence_and_unmatched_when_are_unmocked_calls() -> None:
    tool = wrap(search)
    mocks = {"search": {"sequence": ["one"]}}
    with plan(mocks).record() as rec:
        tool("a")
        with pytest.raises(UnmockedToolError):
            tool("b")
    assert "its `sequence` has 1 responses and this is call 2" in rec.violations[0]
    when = {"search": {"when": [{"args": {"query": "a"}, "return": 1}]}}
    with plan(when).record() as rec, pytest.raises(UnmockedToolError):
        tool("b")
    assert "no `when` entry matches these arguments and there is no `default`" in rec.violations[0]
    with plan(mocks, unmocked="default").record() as rec:
        assert [tool("a"), tool("b")] == ["one", "Mock response for search"]
    assert rec.violations == []


def test_default_and_passthrough_modes(toolbox: types.ModuleType) -> None:
    mocks = ToolMocks()
    mocks.patch("toolbox:dispatch")
    try:
        with plan({}, unmocked="default").record() as rec:
            assert toolbox.dispatch("weather", {"city": "Oslo"}) == "Mock response for weather"
        with plan({}, unmocked="strict", unmocked_tools="passthrough").record() as rec:
            assert toolbox.dispatch("clock", {}) == "real clock: 12:00"
            with pytest.raises(RuntimeError, match="real tool weather reached"):
                toolbox.dispatch("weather", {"city": "Oslo"})
        assert [(c.name, c.result, c.error) for c in rec.calls] == [
            ("clock", "real clock: 12:00", None),
            ("weather", None, "RuntimeError: real tool weather reached"),
        ]
        assert rec.violations == []
    finally:
        mocks.undo()


def test_a_bad_unmocked_mode_is_an_error() -> None:
    with pytest.raises(
        MockConfigError, match="unmocked_tools 'lenient': use one of strict, default, passthrough"
    ):
        plan({}, unmocked="lenient")


# -- stand-ins and patching ----------------------------------------------------------------------


def test_a_stand_in_collected_while_the_registry_is_busy_does_not_deadlock() -> None:
    """A dead stand-in's finalizer may run under the registry's lock in the same thread.

    The cyclic GC may run it inside any allocation, also one made while the registry of live
    stand-ins holds its lock in the same thread (it hung a Python 3.13 run in CI).
    """

    def lost_tool(query: str) -> str:
        return query

    standin: Any = wrap(lost_tool)
    standin.cycle = standin  # only the cyclic GC frees it
    assert "lost_tool" in standins._STANDINS.names()
    del standin

    def collect_while_busy() -> None:
        with standins._STANDINS._lock:
            gc.collect()  # runs the stand-in's finalizer here, in this thread, with the lock held

    worker = threading.Thread(target=collect_while_busy, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "the finalizer waited for the lock its own thread holds"
    assert "lost_tool" not in standins._STANDINS.names()


def test_outside_a_case_stand_ins_call_the_real_tool(toolbox: types.ModuleType) -> None:
    mocks = ToolMocks()
    mocks.patch("toolbox:dispatch")
    try:
        assert toolbox.dispatch("clock", {}) == "real clock: 12:00"
        with pytest.raises(RuntimeError, match="the real search ran"):
            wrap(search)("x")
    finally:
        mocks.undo()


def test_patch_reaches_names_imported_elsewhere_and_undo_restores_them(
    toolbox: types.ModuleType,
) -> None:
    original = toolbox.dispatch
    first, second = ToolMocks(), ToolMocks()
    standin = first.patch("toolbox:dispatch")
    assert second.patch("toolbox:dispatch") is standin  # overlapping tests share one stand-in
    assert sys.modules["toolbox_agent"].dispatch is standin
    assert standin.__name__ == "dispatch" and inspect.signature(standin) == inspect.signature(
        original
    )
    with plan({"lookup": "mocked"}).record() as rec:
        assert sys.modules["toolbox_agent"].dispatch("lookup", '{"id": 7}') == "mocked"
    assert rec.calls[0].args == {
        "id": 7
    }  # JSON arguments, as the OpenAI API sends them, are decoded
    first.undo()
    assert toolbox.dispatch is standin  # the second test still runs
    second.undo()
    assert toolbox.dispatch is original and sys.modules["toolbox_agent"].dispatch is original


def test_patch_tool_records_bound_arguments(toolbox: types.ModuleType) -> None:
    mocks = ToolMocks()
    mocks.patch_tool("toolbox:search")
    try:
        with plan({"search": "hits"}).record() as rec:
            assert toolbox.search("py", 5) == "hits"
        assert rec.calls[0].args == {"query": "py", "limit": 5}
        assert mocks.calls == []  # only recordings made through the fixture's recorder count there
    finally:
        mocks.undo()
    assert toolbox.search is search


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("toolbox.dispatch", "'toolbox.dispatch' is not a 'module:attribute' reference"),
        ("toolbox:nothing", "toolbox:nothing: toolbox has no attribute 'nothing'"),
        ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
        ("toolbox:fetch", "toolbox:fetch: a dispatcher takes (name, args), this takes (url)"),
    ],
)
def test_patch_errors_say_what_to_fix(toolbox: types.ModuleType, target: str, error: str) -> None:
    with pytest.raises(MockConfigError) as info:
        ToolMocks().patch(target)
    assert error in str(info.value)


def test_wrap_keeps_name_signature_and_docstring_and_async_stays_async() -> None:
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        raise RuntimeError("real fetch")

    for func in (search, fetch):
        standin = wrap(func)
        assert (standin.__name__, standin.__doc__) == (func.__name__, func.__doc__)
        assert inspect.signature(standin) == inspect.signature(func)
        assert inspect.iscoroutinefunction(standin) == inspect.iscoroutinefunction(func)
        assert wrap(standin) is standin

    async def main() -> Any:
        with plan({"fetch": {"sequence": ["page 1"]}}).record() as rec:
            return await wrap(fetch)("https://x"), rec.calls

    assert asyncio.run(main()) == ("page 1", [ToolCall("fetch", {"url": "https://x"}, "page 1")])


def test_a_thread_that_lost_the_context_is_served_only_when_unambiguous() -> None:
    tool = wrap(search)
    results: list[Any] = []

    def bare_thread() -> None:
        try:
            results.append(tool("q"))
        except UnmockedToolError as exc:
            results.append(str(exc))

    with plan({"search": "only case"}).record():
        thread = threading.Thread(target=bare_thread)
        thread.start()
        thread.join()
        with plan({"search": "other case"}).record():
            thread = threading.Thread(target=bare_thread)
            thread.start()
            thread.join()
    assert results[0] == "only case"
    assert "did not inherit the eval case's context while 2 cases run" in results[1]


# -- the ini responses file ----------------------------------------------------------------------


def test_responses_file_is_read_with_line_numbers(tmp_path: Path) -> None:
    good = tmp_path / "responses.yaml"
    good.write_text("search: hits\nfetch:\n  sequence: [a, b]\n")
    assert set(load_responses(good)) == {"search", "fetch"}
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "search": "hits",\n  "fetch": {"sequence": []}\n}\n')
    with pytest.raises(
        MockConfigError, match=r"bad.json:3: tool 'fetch'.sequence: expected a non-empty list"
    ):
        load_responses(bad)
    with pytest.raises(MockConfigError, match="does not exist"):
        load_responses(tmp_path / "missing.yaml")


# -- concurrency (done-when 4)
# -------------------------------------------------------------------------


def _case(case_id: str) -> Case:
    return Case(
        id=case_id,
        path=Path("evals/eval_x.yaml"),
        line=3,
        query=case_id,
        tool_mocks={"lookup": {"call": "toolbox:answer"}},
        expect={"tools_exactly": ["lookup"]},
        repeat=2,
    )


def _run_two(agent_a: Any, agent_b: Any) -> dict[str, list[list[Any]]]:
    mocks = ToolMocks()
    mocks.patch("toolbox:dispatch")
    registry = builtin_registry()

    async def both() -> list[Any]:
        settings = [
            RunSettings(checks=registry, recorder=mocks.recorder(plan_of(c))) for c in ("a", "b")
        ]
        return list(
            await asyncio.gather(
                run_case(_case("a"), as_agent(agent_a), settings[0]),
                run_case(_case("b"), as_agent(agent_b), settings[1]),
            )
        )

    try:
        results = asyncio.run(both())
    finally:
        mocks.undo()
    assert all(r.passed for r in results), [t.reasons for r in results for t in r.trials]
    return {
        r.case.id: [[(c.args["case"], c.result) for c in t.run.tool_calls] for t in r.trials]
        for r in results
    }


def plan_of(case_id: str) -> MockPlan:
    return MockPlan.for_case(_case(case_id))


def test_concurrent_cases_in_threads_record_only_their_own_calls(toolbox: types.ModuleType) -> None:
    toolbox.answer = lambda case, n: f"{case}{n}"  # type: ignore[attr-defined]
    barrier = threading.Barrier(4, timeout=10)  # 2 cases x 2 trials: all four agent threads overlap

    def agent(query: str, context: dict[str, Any]) -> str:
        toolbox.dispatch("lookup", {"case": query, "n": 1})
        barrier.wait()
        toolbox.dispatch("lookup", {"case": query, "n": 2})
        return "done"

    calls = _run_two(agent, agent)
    assert calls == {"a": [[("a", "a1"), ("a", "a2")]] * 2, "b": [[("b", "b1"), ("b", "b2")]] * 2}


def test_concurrent_cases_as_asyncio_tasks_record_only_their_own_calls(
    toolbox: types.ModuleType,
) -> None:
    toolbox.answer = lambda case, n: f"{case}{n}"  # type: ignore[attr-defined]
    arrived: list[str] = []

    async def agent(query: str, context: dict[str, Any]) -> str:
        toolbox.dispatch("lookup", {"case": query, "n": 1})
        arrived.append(query)
        while len(arrived) < 4:  # every trial of both cases is between its two calls
            await asyncio.sleep(0)
        toolbox.dispatch("lookup", {"case": query, "n": 2})
        return "done"

    calls = _run_two(agent, agent)
    assert calls == {"a": [[("a", "a1"), ("a", "a2")]] * 2, "b": [[("b", "b1"), ("b", "b2")]] * 2}


def test_a_copied_context_keeps_answering_from_its_case_never_the_real_tool(
    toolbox: types.ModuleType,
) -> None:
    tool = wrap(search)
    with plan({"search": "copied"}).record() as rec:
        ctx = contextvars.copy_context()
    assert (
        ctx.run(tool, "q") == "copied"
    )  # e.g. an agent thread still running after its trial timed out
    assert len(rec.calls) == 1


def test_a_trial_that_raises_in_its_recording_leaves_none_current_and_lists_unused() -> None:
    """The recording's block ends as it began when the trial's code raises.

    The next call goes to the real tool again (no recording current, none in progress for threads
    that lost the context), and the mock the trial never called is listed.
    """
    tool = wrap(search)
    with (
        pytest.raises(ValueError, match="the agent failed"),
        plan({"search": "found"}).record() as rec,
    ):
        raise ValueError("the agent failed")
    assert rec.unused and rec.unused[0].startswith(
        "tool_mocks: 'search' was mocked but never called"
    )
    with pytest.raises(RuntimeError, match="the real search ran"):
        tool("py")  # outside any recording: the real tool
    seen: list[BaseException] = []
    thread = threading.Thread(target=lambda: _call_catching(tool, seen))
    thread.start()
    thread.join()
    assert [str(e) for e in seen] == ["the real search ran"]


def _call_catching(tool: Any, seen: list[BaseException]) -> None:
    try:
        tool("py")
    except BaseException as exc:
        seen.append(exc)
