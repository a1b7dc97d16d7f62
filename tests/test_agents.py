"""Agents of every accepted shape run; failures and hangs stay in their case (SPEC §5, §7)."""

from __future__ import annotations

import pytest

AGENTS = """
import asyncio, socket, time
from pytest_agent_eval import AgentResult, ToolCall

calls = []

def sync_two(query, context):
    return f"sync two {query} {context.get('k')}"

def sync_one(query):
    return f"sync one {query}"

async def async_two(query, context):
    await asyncio.sleep(0.01)
    return {"response": f"async {query}", "tools_called": ["search"]}

def sync_awaitable(query, context):  # a sync callable whose result is awaited (on the loop)
    return async_two(query, context)

class Bot:
    instances = 0
    def __init__(self):
        Bot.instances += 1
    def run(self, query, context):
        return AgentResult(output=f"bot {query} #{Bot.instances}", \
tool_calls=[ToolCall("lookup", {"id": 1})])

class AsyncBot:
    async def ainvoke(self, query, context):
        return {"answer": f"abot {query}"}

class Invoker:
    def invoke(self, query):
        return {"final_message": f"invoked {query}"}

def graph_state(query, context):
    return {"messages": [
        {"role": "user", "content": query},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "search", \
"args": {"q": query}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "result text"},
        {"role": "assistant", "content": "graph answer"},
    ]}

def boom(query, context):
    raise ValueError("the agent broke")

def own_timeout(query, context):
    raise TimeoutError("upstream slow")

async def own_socket_timeout(query, context):
    raise socket.timeout("socket slow")

def hang(query, context):
    time.sleep(30)

async def ahang(query, context):
    await asyncio.sleep(30)

async def _answer(query):
    await asyncio.sleep(0)
    return f"own loop {query}"

def runs_own_loop(query, context):
    return asyncio.run(_answer(query))

loops = set()

async def one_loop(query, context):
    loops.add(id(asyncio.get_running_loop()))
    return f"loops seen {len(loops)}"
"""


@pytest.fixture
def agents(evals: pytest.Pytester) -> pytest.Pytester:
    evals.makepyfile(agents_mod=AGENTS)
    return evals


def test_every_agent_shape(agents: pytest.Pytester) -> None:
    agents.makefile(
        ".yaml",
        eval_shapes="""\
cases:
  - id: sync_two
    input: {query: hi, context: {k: v}}
    expect: {equals: sync two hi v}
  - id: sync_one
    input: hi
    expect: {equals: sync one hi}
  - id: async_two
    input: hi
    expect: {equals: async hi, tools_called: [search]}
  - id: sync_awaitable
    input: hi
    expect: {equals: async hi, tools_called: [search]}
  - id: bot
    input: hi
    expect: {equals: "bot hi #1", tool_args: {lookup: {id: 1}}}
  - id: bot_again
    input: yo
    expect: {equals: "bot yo #1"}
  - id: abot
    input: hi
    expect: {equals: abot hi}
  - id: invoker
    input: hi
    expect: {equals: invoked hi}
  - id: graph_state
    input: hi
    expect: {equals: graph answer, tool_args: {search: {q: hi}}}
""",
    )
    agents.makeconftest(
        """
import pytest

REFS = {"sync_two": "agents_mod:sync_two", "sync_one": "agents_mod:sync_one", \
"async_two": "agents_mod:async_two",
        "sync_awaitable": "agents_mod:sync_awaitable",
        "bot": "agents_mod:Bot", "bot_again": "agents_mod:Bot", "abot": "agents_mod:AsyncBot",
        "invoker": "agents_mod:Invoker", "graph_state": "agents_mod:graph_state"}

@pytest.fixture
def agent(agent_eval_case):
    from pytest_agent_eval.run.agents import resolve
    return resolve(REFS[agent_eval_case.id], _instances)

_instances = {}
"""
    )
    result = agents.runpytest("-v")
    result.assert_outcomes(passed=9)


def test_file_agent_class_is_instantiated_once_per_session(agents: pytest.Pytester) -> None:
    agents.makefile(
        ".yaml",
        eval_cls="""\
agent: agents_mod:Bot
cases:
  - {id: one, input: a, expect: {equals: "bot a #1"}}
  - {id: two, input: b, expect: {equals: "bot b #1"}}
""",
    )
    agents.runpytest().assert_outcomes(passed=2)


def test_session_scoped_agent_fixture_in_conftest(agents: pytest.Pytester) -> None:
    agents.makeconftest(
        """
import pytest

made = []

@pytest.fixture(scope="session")
def agent():
    made.append(1)
    def run(query, context):
        return f"{query} from session agent #{len(made)}"
    return run
"""
    )
    agents.makefile(
        ".yaml",
        eval_fix="""\
cases:
  - {id: one, input: a, expect: {equals: "a from session agent #1"}}
  - {id: two, input: b, expect: {equals: "b from session agent #1"}}
""",
    )
    agents.runpytest().assert_outcomes(passed=2)


def test_cli_agent_overrides_the_file(agents: pytest.Pytester) -> None:
    agents.makefile(
        ".yaml",
        eval_cli="agent: agents_mod:boom\ncases:\n"
        "  - {id: one, input: a, expect: {equals: sync one a}}\n",
    )
    agents.runpytest().assert_outcomes(failed=1)
    agents.runpytest("--agent", "agents_mod:sync_one").assert_outcomes(passed=1)


def test_raising_agent_fails_only_its_case_with_its_traceback(agents: pytest.Pytester) -> None:
    agents.makefile(
        ".yaml",
        eval_err="""\
cases:
  - {id: broken, input: a}
  - {id: fine, input: a, expect: {equals: sync one a}}
""",
    )
    agents.makeconftest(
        """
import pytest, agents_mod

@pytest.fixture
def agent(agent_eval_case):
    return agents_mod.boom if agent_eval_case.id == "broken" else agents_mod.sync_one
"""
    )
    result = agents.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "case broken failed: the agent failed, nothing was checked (score 0.00)",
            "  ✗ agent raised ValueError: the agent broke",
            "*Traceback (most recent call last):",
            '*File "*agents_mod.py", line *, in boom',
            "*ValueError: the agent broke",
            "eval_err.yaml:2: broken",
        ]
    )
    assert "pytest_agent_eval" not in result.stdout.str()


@pytest.mark.parametrize("which", ["hang", "ahang"])
def test_hanging_agent_times_out_and_the_run_goes_on(agents: pytest.Pytester, which: str) -> None:
    agents.makefile(
        ".yaml",
        eval_hang="""\
cases:
  - {id: stuck, input: a, timeout: 0.5}
  - {id: after, input: a, expect: {equals: sync one a}}
""",
    )
    agents.makeconftest(
        f"""
import pytest, agents_mod

@pytest.fixture
def agent(agent_eval_case):
    return agents_mod.{which} if agent_eval_case.id == "stuck" else agents_mod.sync_one
"""
    )
    result = agents.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "case stuck failed: the agent failed, nothing was checked (score 0.00)",
            "  ✗ agent did not answer within 0.5 s*",
        ]
    )


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("own_timeout", "TimeoutError: upstream slow"),
        ("own_socket_timeout", "TimeoutError: socket slow"),
    ],
)
def test_an_agents_own_timeout_error_reads_as_the_agents_exception(
    agents: pytest.Pytester, which: str, message: str
) -> None:
    agents.makefile(
        ".yaml",
        eval_own=f"""\
agent: agents_mod:{which}
cases:
  - {{id: no_timeout, input: a}}
  - {{id: with_timeout, input: a, timeout: 30}}
""",
    )
    result = agents.runpytest()
    result.assert_outcomes(failed=2)
    for case in ("no_timeout", "with_timeout"):
        result.stdout.fnmatch_lines(
            [
                f"*_ {case} _*",
                f"case {case} failed: the agent failed, nothing was checked (score 0.00)",
                f"  ✗ agent raised {message}",
                f"*, in {which}",
                f"*{message}",
            ]
        )
    result.stdout.no_fnmatch_line("*did not answer*")
    result.stdout.no_fnmatch_line("*NoneType*")


def test_default_timeout_option(agents: pytest.Pytester) -> None:
    agents.makefile(".yaml", eval_t="agent: agents_mod:hang\ncases:\n  - {id: stuck, input: a}\n")
    result = agents.runpytest("--agent-eval-timeout", "0.3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  ✗ agent did not answer within 0.3 s*"])


def test_pytest_timeout_still_works_as_a_backstop(agents: pytest.Pytester) -> None:
    agents.makefile(".yaml", eval_t="agent: agents_mod:hang\ncases:\n  - {id: stuck, input: a}\n")
    agents.makepyfile(test_after="def test_after():\n    pass\n")
    result = agents.runpytest_subprocess("--timeout", "1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    # pytest-timeout 2.2 says "Timeout >1.0s", newer releases "Timeout (>1.0s) from pytest-timeout."
    result.stdout.fnmatch_lines(["FAILED eval_t.yaml::stuck - Failed: Timeout*>1.0s*"])


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_sync_agent_may_run_its_own_loop_and_async_agents_share_one(
    agents: pytest.Pytester, concurrency: str
) -> None:
    cases = "".join(
        f"  - {{id: c{i}, input: q{i}, expect: {{equals: own loop q{i}}}}}\n" for i in range(6)
    )
    agents.makefile(".yaml", eval_own=f"agent: agents_mod:runs_own_loop\ncases:\n{cases}")
    cases = "".join(
        f"  - {{id: a{i}, input: q, expect: {{equals: loops seen 1}}}}\n" for i in range(6)
    )
    agents.makefile(".yaml", eval_one=f"agent: agents_mod:one_loop\ncases:\n{cases}")
    result = agents.runpytest("--agent-eval-concurrency", concurrency)
    result.assert_outcomes(passed=12)


def test_no_agent_says_how_to_provide_one(evals: pytest.Pytester) -> None:
    evals.makefile(".yaml", eval_none="cases:\n  - {id: lonely, input: a}\n")
    result = evals.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "eval_none.yaml:2: no agent for case lonely: set `agent: module:function` in "
            "the file, pass --agent*"
        ]
    )
    result.stdout.no_fnmatch_line("*FixtureRequest*")  # no internal objects, no exception chain
    result.stdout.no_fnmatch_line("*During handling of the above exception*")
