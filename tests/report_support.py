"""Known outcomes for the report tests, and a conftest dumping the records the controller got."""

USAGE_AGENT = '''
import collections, time

CALLS = collections.Counter()

def run(query, context):
    """Answers from the case's context: `say`, `calls` (names or {name, args}), `usage`, \
`sleep`, `raise`;
    `flaky: key` answers "nope" on the first call with that key; `crash` ends the process."""
    if context.get("raise"):
        raise RuntimeError(context["raise"])
    if context.get("crash"):
        import os
        os._exit(1)  # the process dies: an xdist worker crash
    time.sleep(context.get("sleep", 0))
    if context.get("flaky"):
        CALLS[context["flaky"]] += 1
        if CALLS[context["flaky"]] == 1:
            return "nope"
    return {"output": context.get("say", query), "tools_called": context.get("calls", []),
            "usage": context.get("usage", {})}
'''

SUITE = """\
agent: usage_agent:run
tags: [routing]
cases:
  - id: ok
    description: All good
    input: hi
    metadata: {owner: ann}
    context:
      say: hello there
      calls: [{name: search, args: {q: hi}}]
      usage: {prompt_tokens: 10, completion_tokens: 5, cost: 0.25}
    expect: {contains: [hello], tools_called: [search]}
  - id: bad
    input: hi
    tags: [kb]
    context: {say: "nope", calls: [fetch], usage: {input_tokens: 3, output_tokens: 4}}
    expect: {contains: [hello], tools_called: [search]}
  - id: partial
    input: hi
    min_score: 0.5
    context: {say: "hello", calls: [fetch]}
    expect: {contains: [hello], tools_called: [search]}
  - id: rep
    input: hi
    repeat: 3
    context: {say: "hello"}
    expect: {contains: [hello]}
  - id: flaky
    input: hi
    repeat: 4
    min_pass_rate: 0.7
    context: {say: "hello", flaky: f}
    expect: {contains: [hello]}
  - id: skipped
    skip: not today
    input: hi
  - id: boom
    input: hi
    context: {raise: kaput}
    expect: {contains: [hello]}
  - id: known_bug
    xfail: tracked elsewhere
    input: hi
    context: {say: "no"}
    expect: {contains: [hello]}
  - id: fixed_bug
    xfail: tracked elsewhere
    input: hi
    context: {say: "hello"}
    expect: {contains: [hello]}
"""

BROKEN = "agent: usage_agent:run\ncases: [{id: x, input: hi, expect: {contans: [a]}}]\n"
UNREADABLE = "cases: [\n"

DUMP_CONFTEST = """
import json, os

WORKER = False

def pytest_configure(config):
    global WORKER
    WORKER = hasattr(config, "workerinput")

def pytest_runtest_logreport(report):
    data = getattr(report, "agent_eval", None)
    if data is not None and not WORKER and "RECORDS_OUT" in os.environ:
        with open(os.environ["RECORDS_OUT"], "a") as f:
            f.write(json.dumps(data, sort_keys=True) + "\\n")
"""
