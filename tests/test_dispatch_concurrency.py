"""A file's ``tool_dispatch:`` patch answers that file's cases only, at any concurrency.

At ``--agent-eval-concurrency`` > 1, cases of another file (no dispatch, no mocks) that run while
it is patched get the real dispatcher, as they do serially.
"""

from __future__ import annotations

import pytest

AGENT = """
import asyncio


def dispatch_tool(name, args):
    return f"real {name}"


async def agent(query, context):
    await asyncio.sleep(0.3)  # the cases of both files are in flight together
    result = dispatch_tool("search", {"q": query})
    await asyncio.sleep(0.3)
    return str(result)
"""


def test_a_files_dispatch_patch_does_not_answer_another_files_cases(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(desk=AGENT)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_mocked="""
agent: desk:agent
tool_dispatch: desk:dispatch_tool
cases:
"""
        + "".join(
            f"  - {{id: mocked{n}, input: q{n}, tool_mocks: {{search: mocked}}, expect: "
            "{contains: [mocked]}}\n"
            for n in range(3)
        ),
        eval_real="""
agent: desk:agent
cases:
"""
        + "".join(
            f"  - {{id: real{n}, input: q{n}, expect: {{contains: [real search]}}}}\n"
            for n in range(3)
        ),
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-concurrency", "6")
    result.assert_outcomes(passed=6)
