"""What a case file may name: case ids, tags, matrix agents, and what an unmocked tool call does.

Patterns for JSON Schema and Python alike. Apart from the case model (``core.case``): the options
check names with them in every run, and a run of plain tests makes no case.
"""

from __future__ import annotations

import re

UNMOCKED_MODES = ("strict", "default", "passthrough")
"""What a case's ``unmocked_tools`` may be: what a call to a tool without a mocked response does."""
# Patterns for JSON Schema (ECMA-262) and Python alike: `(?![\s\S])` is the end of the text
# (Python's `$` also
# matches before a final newline, and `\Z` is not ECMA-262).
ID_PATTERN = r"^[A-Za-z0-9_-]+(?![\s\S])"
ID_RE = re.compile(ID_PATTERN)
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*(?![\s\S])"
TAG_RE = re.compile(TAG_PATTERN)
"""What a tag may be: a name pytest accepts as a marker and in ``-m``.

A tag becomes a pytest marker (``-m tag`` selects it).
"""
TAG_RULE = "a tag starts with a letter or digit, then letters, digits, `_` or `-`"
_SLUG_RE = re.compile(r"[^A-Za-z0-9_-]+")
AGENT_NAME_PATTERN = TAG_PATTERN
"""A matrix agent's name: it ends the variant's node id, ``case[name]``."""


def slugify(text: str, max_len: int = 60) -> str:
    """A case id derived from a name: ``"Knowledge base search"`` -> ``"knowledge_base_search"``."""
    slug = _SLUG_RE.sub("_", text.strip().lower()).strip("_-")
    return slug[:max_len].rstrip("_-") or "case"
