"""The agent's tools: JSON schemas the LLM sees, and ``dispatch_tool(name, args)`` that runs them.

The real implementations would call the Reddit API and a vector store; here they raise, so an eval
that reaches one by mistake says so instead of touching the outside world.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionFunctionToolParam

TOOLS: list[ChatCompletionFunctionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "search_knowledge_base",
            "description": "Search the knowledge base of summarised Reddit discussions.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to search for"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch_reddit_thread",
            "description": "Fetch one Reddit thread by its id, with its top comments.",
            "parameters": {
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string", "description": "the thread id, e.g. abc123"}
                },
                "required": ["thread_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "fetch_subreddit_posts",
            "description": "Fetch the current hot posts of a subreddit.",
            "parameters": {
                "type": "object",
                "properties": {
                    "subreddit": {"type": "string", "description": "the subreddit name without r/"},
                    "limit": {"type": "integer", "description": "how many posts", "default": 5},
                },
                "required": ["subreddit"],
            },
        },
    },
]


def search_knowledge_base(query: str) -> str:
    raise RuntimeError(f"search_knowledge_base({query!r}) would query the vector store")


def fetch_reddit_thread(thread_id: str) -> str:
    raise RuntimeError(f"fetch_reddit_thread({thread_id!r}) would call the Reddit API")


def fetch_subreddit_posts(subreddit: str, limit: int = 5) -> str:
    raise RuntimeError(f"fetch_subreddit_posts({subreddit!r}) would call the Reddit API")


IMPLEMENTATIONS: dict[str, Callable[..., str]] = {
    "search_knowledge_base": search_knowledge_base,
    "fetch_reddit_thread": fetch_reddit_thread,
    "fetch_subreddit_posts": fetch_subreddit_posts,
}


def dispatch_tool(name: str, args: dict[str, Any]) -> str:
    """Run the tool ``name`` with the arguments the LLM gave."""
    try:
        implementation = IMPLEMENTATIONS[name]
    except KeyError:
        raise ValueError(f"unknown tool {name!r}") from None
    return implementation(**args)
