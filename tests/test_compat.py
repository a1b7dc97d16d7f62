"""The private-API wrappers degrade instead of failing when pytest, xdist or asyncio change."""

from __future__ import annotations

import asyncio
import os
import queue
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.run import blocking


def _config(*plugins: object, worker: bool = True) -> Any:
    config = types.SimpleNamespace(
        pluginmanager=types.SimpleNamespace(get_plugins=lambda: list(plugins))
    )
    if worker:
        config.workerinput = {"workerid": "gw0"}
    return config


def test_xdist_pending_reads_the_queue_of_xdist_before_3_7() -> None:
    old = queue.Queue()  # xdist < 3.7: a plain queue.Queue of indices and marks
    for value in (4, 5, object()):
        old.put(value)
    plugin = types.SimpleNamespace(torun=old, nextitem_index=3)
    assert compat.xdist_pending(_config(plugin)) == [3, 4, 5]


def test_xdist_pending_reads_the_locked_queue_of_xdist_3_7_and_later() -> None:
    class Locked:
        @contextmanager
        def lock(self) -> Iterator[list[object]]:
            yield [7, 8, "shutdown"]

    plugin = types.SimpleNamespace(torun=Locked(), nextitem_index=6)
    assert compat.xdist_pending(_config(plugin)) == [6, 7, 8]


def test_xdist_pending_degrades_to_nothing_known() -> None:
    class Broken:
        def lock(self) -> Any:
            raise RuntimeError("changed")

    assert (
        compat.xdist_pending(_config(types.SimpleNamespace(torun=Broken(), nextitem_index=1))) == []
    )
    assert compat.xdist_pending(_config(object())) == []  # no worker plugin found
    assert compat.xdist_pending(_config(worker=False)) is None  # not a worker


def test_fixture_definition_degrades_to_none() -> None:
    class Manager:
        def getfixturedefs(self, name: str, node: object) -> Any:
            raise TypeError("a new signature")

    item: Any = types.SimpleNamespace(
        session=types.SimpleNamespace(_fixturemanager=Manager()), nodeid="f.py::t"
    )
    assert compat.fixture_definition(item, "agent") is None
    item.session = types.SimpleNamespace()  # no fixture manager at all
    assert compat.fixture_definition(item, "agent") is None


def test_fixture_definition_falls_back_to_the_node_id_of_pytest_8_0() -> None:
    class Manager:
        def getfixturedefs(self, name: str, nodeid: object) -> Any:
            if not isinstance(nodeid, str):
                raise AttributeError("'Item' object has no attribute 'split'")
            return ["outer", "inner"]

    item: Any = types.SimpleNamespace(
        session=types.SimpleNamespace(_fixturemanager=Manager()), nodeid="f.py::t"
    )
    assert compat.fixture_definition(item, "agent") == "inner"


def test_a_blocking_call_runs_its_own_loop_even_where_the_loop_cannot_be_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        compat, "set_running_loop", lambda loop: False
    )  # as on a Python without the hook

    async def outer() -> Any:
        return blocking.outside_loop(lambda: asyncio.run(asyncio.sleep(0, "inner ran")))

    assert asyncio.run(outer()) == "inner ran"


@pytest.mark.parametrize(
    "keeps", [True, False], ids=["item keeps its request", "fallback: request argument"]
)
def test_eval_items_run_with_and_without_the_items_own_request(
    evals: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keeps: bool
) -> None:
    monkeypatch.setattr(compat, "item_keeps_request", lambda: keeps)
    evals.makeconftest(
        """
        import pytest

        @pytest.fixture
        def agent(request):
            from scripted import run
            return run
        """
    )
    evals.makefile(
        ".yaml",
        eval_req="""
        cases:
          - id: good
            input: hello
            expect: {contains: [hello]}
          - id: bad
            input: hello
            expect: {contains: [bye]}
          - id: mocked
            input: hello
            tool_mocks: {search: {return: x}}
        """,
    )
    result = evals.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ bad _*",
            "*contains: output lacks 'bye'*",
            "eval_req.yaml:5: bad",
            "*_ mocked _*",
            "eval_req.yaml:8: case mocked has tool_mocks for search but no tool is patched*",
            "FAILED eval_req.yaml::bad - *",
        ]
    )
    assert (
        "pytest_agent_eval" not in result.stdout.str()
    )  # no frame of the plugin in the failure text


def test_keeping_pytest_current_test_degrades_to_pytest_removing_it() -> None:
    from _pytest import runner

    original = runner._update_current_test_var
    del runner._update_current_test_var  # a pytest without it (pytest needs it back to go on)
    try:
        undo = compat.keep_current_test_var()  # nothing to wrap: nothing changes
        assert not hasattr(runner, "_update_current_test_var")
        undo()
    finally:
        runner._update_current_test_var = original


def test_pytest_current_test_is_kept_between_items_and_removed_by_the_undo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from _pytest import runner

    original = runner._update_current_test_var
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    item = types.SimpleNamespace(nodeid="eval.yaml::a")
    undo = compat.keep_current_test_var()
    try:
        runner._update_current_test_var(item, "teardown")  # type: ignore[arg-type]
        runner._update_current_test_var(item, None)  # type: ignore[arg-type]
        assert os.environ["PYTEST_CURRENT_TEST"] == "eval.yaml::a (teardown)"
    finally:
        undo()
    assert runner._update_current_test_var is original
    assert "PYTEST_CURRENT_TEST" not in os.environ
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "restored for pytest's own teardown")


def test_a_run_folder_degrades_to_the_system_temporary_folder(tmp_path: Any) -> None:
    class Changed:
        def getbasetemp(self) -> Any:
            raise AttributeError("renamed")

    for config in (types.SimpleNamespace(), types.SimpleNamespace(_tmp_path_factory=Changed())):
        made = compat.run_temp_dir(config, "agent-eval-workers-")  # type: ignore[arg-type]
        try:
            assert made.is_dir() and made.name.startswith("agent-eval-workers-")
            assert (made.stat().st_mode & 0o777) == 0o700
        finally:
            made.rmdir()


def test_a_thread_spinning_in_python_is_stopped_by_an_exception_raised_in_it() -> None:
    import threading

    stopped: list[str] = []

    def spin() -> None:
        try:
            while True:
                pass
        except SystemExit:
            stopped.append("SystemExit")

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    assert compat.raise_in_thread(thread, SystemExit)
    thread.join(timeout=30)
    assert not thread.is_alive() and stopped == ["SystemExit"]
    assert not compat.raise_in_thread(thread, SystemExit)  # ended: nothing to raise in


def test_raising_in_a_thread_degrades_to_nothing_without_the_c_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ctypes
    import threading

    monkeypatch.delattr(ctypes, "pythonapi")  # as on PyPy
    done = threading.Event()
    thread = threading.Thread(target=done.wait, daemon=True)
    thread.start()
    try:
        assert not compat.raise_in_thread(thread, SystemExit)
        assert thread.is_alive()
    finally:
        done.set()
        thread.join()
