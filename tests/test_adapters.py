"""The adapter registry: which adapter takes an agent or tool, in what order, what others get."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval import Adapter, AdapterRegistry, RunRecord
from pytest_agent_eval.adapters import Agent, StandIn, builtin_adapters, calling
from pytest_agent_eval.imports import FRAMEWORK_EXTRAS, ImportRefError, import_object
from pytest_agent_eval.mocks import MockPlan, Value, wrap
from pytest_agent_eval.run.agents import invoke


class Upper:
    """A toy adapter: takes objects with ``shout`` and answers in upper case."""

    name = "upper"

    def recognises(self, obj: Any) -> bool:
        return hasattr(obj, "shout")

    def agent(self, obj: Any, name: str) -> Agent:
        return calling(obj.shout, name, self, obj)

    def normalise(self, result: Any) -> RunRecord:
        return RunRecord(output=str(result).upper())

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        return None

    def mock_tools(self, obj: Any, wrap: Any) -> Any:
        return None


class Shouter:
    def shout(self, query: str) -> str:
        return f"hey {query}"

    def __call__(self, query: str) -> str:  # a callable too: the plain adapter would take it
        return "plain"


def _run(agent: Agent, query: str) -> RunRecord:
    return agent.adapter.normalise(asyncio.run(invoke(agent, query, {})))


def test_a_registered_adapter_is_tried_before_the_built_in_ones() -> None:
    registry = builtin_adapters()
    assert registry.names() == [
        "openai_agents",
        "pydantic_ai",
        "langchain",
        "promptfoo",
        "http",
        "plain",
    ]
    assert _run(registry.as_agent(Shouter()), "you").output == "plain"
    registry.register(Upper())
    assert registry.names() == [
        "upper",
        "openai_agents",
        "pydantic_ai",
        "langchain",
        "promptfoo",
        "http",
        "plain",
    ]
    agent = registry.as_agent(Shouter(), "shouter")
    assert (agent.adapter.name, agent.name) == ("upper", "shouter")
    assert _run(agent, "you").output == "HEY YOU"


def test_the_protocol_is_what_registration_checks() -> None:
    assert isinstance(Upper(), Adapter)
    with pytest.raises(TypeError, match="lacks normalise, wrap_tool, mock_tools"):
        AdapterRegistry([]).register(
            type("Half", (), {"name": "half", "recognises": 1, "agent": 2})()
        )


def test_no_adapter_takes_it() -> None:
    with pytest.raises(
        TypeError, match=r"got int 3, not an agent: expected a callable \(query, context\)"
    ):
        builtin_adapters().as_agent(3)
    with pytest.raises(
        TypeError, match=r"cannot wrap 3: expected a function or a tool object of a framework "
    ):
        wrap(3)


def test_plain_callables_one_or_two_arguments_sync_or_async() -> None:
    async def two(query: str, context: dict[str, Any]) -> str:
        return f"{query} {context}"

    registry = builtin_adapters()
    assert _run(registry.as_agent(lambda q: q * 2), "ab").output == "abab"
    agent = registry.as_agent(two)
    assert agent.is_async and agent.adapter.name == "plain"
    assert _run(agent, "q").output == "q {}"


def test_a_wrapped_tool_answers_from_the_running_case() -> None:
    def search(query: str) -> str:
        raise ConnectionError("the real tool must not run")

    standin = wrap(search)
    assert wrap(standin) is standin and standin.__name__ == "search"
    with MockPlan({"search": Value("found")}).record() as recording:
        assert standin("cats") == "found"
    assert [(c.name, c.args, c.result) for c in recording.calls] == [
        ("search", {"query": "cats"}, "found")
    ]


def test_recognising_agents_imports_no_framework() -> None:
    script = (
        "import sys\n"
        "from pytest_agent_eval.adapters import builtin_adapters\n"
        "from pytest_agent_eval.mocks import wrap\n"
        "builtin_adapters().as_agent(lambda q: q)\n"
        "wrap(lambda q: q)\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(roots & {'langchain_core', 'langgraph', 'pytest', '_pytest'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


class Served:
    """A toy adapter for agent references that are URLs: nothing is imported for them."""

    name = "served"

    def recognises(self, obj: Any) -> bool:
        return isinstance(obj, str) and obj.startswith("toy://")

    def agent(self, obj: Any, name: str) -> Agent:
        return calling(lambda query: f"{obj} answered {query}", name, self, obj)

    def normalise(self, result: Any) -> RunRecord:
        return RunRecord(output=str(result))

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        return None

    def mock_tools(self, obj: Any, wrap: Any) -> Any:
        return None


def test_an_adapter_may_take_the_reference_itself_before_any_import() -> None:
    from pytest_agent_eval.imports import ImportRefError
    from pytest_agent_eval.run.agents import resolve

    registry = builtin_adapters()
    registry.register(Served())
    instances: dict[str, Any] = {}
    agent = resolve("toy://agent", instances, registry)
    assert (agent.adapter.name, _run(agent, "hi").output) == ("served", "toy://agent answered hi")
    assert resolve("toy://agent", instances, registry) is agent  # once per session
    with pytest.raises(ImportRefError, match="cannot import module 'toy'"):
        resolve(
            "toy://agent", {}, builtin_adapters()
        )  # no adapter for it: a module:attr reference that fails


def test_an_agent_whose_framework_is_missing_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fw_agent.py").write_text("import not_installed_framework_xyz\nAGENT = object()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(FRAMEWORK_EXTRAS, "not_installed_framework_xyz", "some-extra")
    with pytest.raises(ImportRefError) as raised:
        import_object("fw_agent:AGENT")
    assert (
        "the agent's framework is not installed: pip install 'pytest-agent-evalset[some-extra]'"
        in str(raised.value)
    )
    assert (
        FRAMEWORK_EXTRAS["agents"] == "openai-agents"
        and FRAMEWORK_EXTRAS["pydantic_ai"] == "pydantic-ai"
    )
