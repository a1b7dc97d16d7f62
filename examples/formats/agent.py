"""A keyword-routed demo agent for the example eval files of every supported format.

Offline and deterministic: no LLM, no network. Each rule names the words a query must contain, the
tools the agent calls (through :func:`dispatch_tool`, which tool mocks can patch) and the answer it
gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_agent_eval import AgentResult, RunRecord, ToolCall


@dataclass(frozen=True)
class Rule:
    """Queries with all of ``words`` call ``tools``, get ``answer`` (``{result}``: 1st tool's)."""

    words: tuple[str, ...]
    tools: tuple[str, ...]
    answer: str


RULES = (
    # Neon suite (eval_neon_suite.yaml)
    Rule(("capital", "france"), ("web_search",), "Paris is the capital of France."),
    Rule(("15 multiplied by 7",), (), "Step 1: 15 x 7 = 105. So 15 multiplied by 7 is 105."),
    Rule(
        ("climate change", "summarize"),
        ("web_search", "summarize"),
        "Key points: warmer years, rising seas.",
    ),
    Rule(("thank",), (), "You're welcome, glad to help!"),
    # Decision and QA golden sets (eval_golden_decisions.json, eval_golden_qa.json)
    Rule(
        ("allocate vehicle 42",),
        ("auto_allocate_vehicle",),
        "Allocated in requested window: dyno 3, 2 days.",
    ),
    Rule(
        ("vehicle_id 99999",), ("auto_allocate_vehicle",), "Vehicle not found: nothing was booked."
    ),
    Rule(
        ("weight limits",),
        (),
        "weight_lbs is converted to <10K or >10K; matching uses supported_weight_classes.",
    ),
    Rule(("force an awd",), (), "The request should be refused if supported_drives lacks AWD."),
    # Category JSON (eval_categories.json)
    Rule(("2 + 2",), (), "2 + 2 = 4"),
    Rule(("100 divided by 4",), (), "100 divided by 4 is 25."),
    Rule(("who are you",), (), "Hi, I am FormatsBot, a small demo assistant."),
    Rule(("latest news",), ("web_search",), "Top findings from the web: three product launches."),
    # Tool-routing case list (eval_tool_routing.json)
    Rule(("type hints",), ("search_knowledge_base",), "From the knowledge base: {result}"),
    Rule(("trending", "r/python"), ("fetch_subreddit_posts",), "Trending now: {result}"),
    Rule(("thread with id",), ("fetch_reddit_thread",), "The thread: {result}"),
)

RESULTS = {
    "web_search": "Search results for {query!r}",
    "summarize": "Summary of the search results",
    "auto_allocate_vehicle": "allocation result",
    "search_knowledge_base": "Result 1 (r/python): type hints discussion",
    "fetch_subreddit_posts": "Latest hot posts from r/python",
    "fetch_reddit_thread": "Thread: What's new in Python 3.13",
}


def dispatch_tool(name: str, args: dict[str, Any]) -> str:
    """Run one tool (offline stand-ins). Tool mocks patch this function to give canned responses."""
    return RESULTS[name].format(**args)


def run(query: str, context: dict[str, Any] | None = None) -> AgentResult:
    """Answer ``query``: the first rule whose words all occur in it decides tools and answer."""
    text = query.lower()
    rule = next((r for r in RULES if all(w in text for w in r.words)), None)
    if rule is None:
        return AgentResult(output="Sorry, I cannot help with that.")
    calls = []
    for tool in rule.tools:
        args = {"query": query}
        calls.append(ToolCall(tool, args, dispatch_tool(tool, args)))
    result = str(calls[0].result).splitlines()[0] if calls else ""
    output = rule.answer.format(result=result)
    return AgentResult(
        output=output, tool_calls=calls, reasoning=f"matched {', '.join(rule.words)}"
    )


def thanks_politely(run: RunRecord) -> tuple[bool, str]:
    """A custom check for the Neon suite's ``custom`` scorer: the answer is polite."""
    polite = any(word in run.output.lower() for word in ("welcome", "glad", "please"))
    return polite, "polite" if polite else "no polite phrase in the answer"
