"""Every assertion type promptfoo has; for each one the plugin does not run, what to write instead.

The list is promptfoo's own: ``BaseAssertionTypesSchema`` and ``SpecialAssertionTypesSchema`` in its
``src/types/index.ts``, plus ``assert-set`` and the red team's ``promptfoo:redteam:*``. The formats
page of the docs (``docs/reference/formats.md``, "promptfoo assertions") shows the same table; a
test holds the two together.
"""

from __future__ import annotations

import difflib

_METRIC = (
    "a `python` assertion file (`file://metric.py`, `get_assert(output, context)`) computing it "
    "with a library (nltk, rouge-score, …), the reference text in `context['vars']` or the "
    "assertion's `config`"
)
_PARSE = "a `python` assertion that parses the output ({how}); `False` or a raised error fails it"
_RUBRIC = "an `llm-rubric` whose value states it ({example}); the plugin's judge grades it"
_TRACES = (
    "the plugin sees the agent's tool calls, not its trace spans: `trajectory:step-count` with "
    "`type: tool` for counts, `latency` for time"
)
_FUNCTION_CALL = (
    "a `python` assertion checking the tool calls in the output "
    "(`json.loads(output)['tool_calls']`, e.g. with `jsonschema.validate`), or "
    "`trajectory:tool-used`"
)
_SIMILAR = (
    "`factuality` with the expected text as its value, or an `llm-rubric` "
    "(`value: says the same as: <text>`); the plugin has no embedding model"
)
_BEST = (
    "none: it picks the best of several outputs; the plugin judges each case on its own (give "
    "each provider's case the assertions it must pass)"
)
_LOGPROBS = "none: it needs the model's log-probabilities, which the plugin does not collect"
_CRITERIA = "the criteria as its value, with `threshold`"

INSTEAD: dict[str, str] = {
    "answer-relevance": _RUBRIC.format(example="`value: answers the question that was asked`"),
    "bleu": _METRIC,
    "classifier": (
        "a `python` assertion file that runs the classifier "
        "(e.g. a transformers pipeline) on the output"
    ),
    "contains-html": _PARSE.format(how="`html.parser.HTMLParser`, or `regex: <[a-z]+[^>]*>`"),
    "contains-sql": _PARSE.format(how="the SQL part, e.g. with sqlglot or sqlparse"),
    "contains-xml": _PARSE.format(how="the XML part, `xml.etree.ElementTree.fromstring`"),
    "context-faithfulness": _RUBRIC.format(
        example="`value: 'is supported by this context: {{context}}'`"
    ),
    "context-recall": _RUBRIC.format(example="`value: 'states every fact of: {{context}}'`"),
    "context-relevance": _RUBRIC.format(
        example="`value: 'the context {{context}} answers {{query}}'`"
    ),
    "conversation-relevance": _RUBRIC.format(example="`value: stays relevant to the conversation`")
    + "; or a native conversation case (turns, a simulated user)",
    "finish-reason": (
        "a Python provider that puts the finish reason in its output, checked with `contains`"
    ),
    "g-eval": _RUBRIC.format(example=_CRITERIA),
    "gleu": _METRIC,
    "guardrails": _RUBRIC.format(example="`value: refuses unsafe requests`")
    + "; or a Python provider that puts the guardrail's flag in its output",
    "human": "none: promptfoo's web UI grades by hand; the plugin needs a verdict it can compute",
    "is-html": _PARSE.format(how="`html.parser.HTMLParser`"),
    "is-refusal": (
        "`llm-rubric` with `value: refuses to help` (or `not-…` for the opposite), "
        "or a `regex` of refusal phrases"
    ),
    "is-sql": _PARSE.format(how="e.g. with sqlglot or sqlparse"),
    "is-valid-function-call": _FUNCTION_CALL,
    "is-valid-openai-function-call": _FUNCTION_CALL,
    "is-valid-openai-tools-call": _FUNCTION_CALL,
    "is-xml": _PARSE.format(how="`xml.etree.ElementTree.fromstring(output)`"),
    "javascript": (
        "a `python` assertion: the same expression in Python (`output.startswith('Ahoy')`), a "
        "body that `return`s, or `file://x.py` with `get_assert(output, context)`"
    ),
    "levenshtein": (
        "a `python` assertion: `difflib.SequenceMatcher(None, output, 'text').ratio() > 0.9` in "
        "a `file://` assertion, or `equals`"
    ),
    "max-score": _BEST,
    "meteor": _METRIC,
    "moderation": _RUBRIC.format(example="`value: is free of harmful content`")
    + "; or a `python` assertion file calling a moderation API",
    "perplexity": _LOGPROBS,
    "perplexity-score": _LOGPROBS,
    "pi": _RUBRIC.format(example=_CRITERIA),
    "promptfoo:redteam:*": (
        "none: the red team's graders run in promptfoo's `redteam`, not in an eval config"
    ),
    "rouge-n": _METRIC,
    "ruby": "a `python` assertion (the same logic in Python)",
    "search-rubric": _RUBRIC.format(example="the facts to check as its value")
    + " (the judge does not search the web)",
    "select-best": _BEST,
    "similar": _SIMILAR,
    "similar:cosine": _SIMILAR,
    "similar:dot": _SIMILAR,
    "similar:euclidean": _SIMILAR,
    "skill-used": "`trajectory:tool-used` with the skill's tool name",
    "trace-error-spans": _TRACES,
    "trace-span-count": _TRACES,
    "trace-span-duration": _TRACES,
    "trajectory:goal-success": _RUBRIC.format(
        example="`value: the user's goal was reached: <the goal>`"
    ),
    "trajectory:tool-args-match": (
        "a `python` assertion reading the calls' arguments from the output "
        "(`json.loads(output)['tool_calls']`); in a native eval file, the `tool_args` check"
    ),
    "webhook": (
        "a `python` assertion file that posts the output to the webhook and returns its verdict"
    ),
    "word-count": "a `python` assertion: `len(output.split()) <= 50`",
}
"""What to write instead of each promptfoo assertion type the plugin does not run.

Shown in the error; ``none: <why>`` where nothing can stand in for it.
"""

_AS_IN = "as in promptfoo"

SUPPORTED_TYPES: dict[str, str] = {
    "assert-set": f"{_AS_IN}: its own `threshold`, counts as one assertion of its `weight`",
    "contains": _AS_IN,
    "contains-all": f"{_AS_IN} (a list, or a comma-separated string)",
    "contains-any": f"{_AS_IN} (a list, or a comma-separated string)",
    "contains-json": f"{_AS_IN}, with a JSON Schema value",
    "cost": (
        f"{_AS_IN}, with `threshold` "
        "(dollars; the traffic hook's priced usage, else the provider's)"
    ),
    "equals": f"{_AS_IN} (an object value compares JSON)",
    "factuality": "as in promptfoo's five categories, graded by the plugin's judge",
    "icontains": _AS_IN,
    "icontains-all": _AS_IN,
    "icontains-any": _AS_IN,
    "is-json": f"{_AS_IN}, with a JSON Schema value",
    "latency": f"{_AS_IN}, with `threshold` (ms)",
    "llm-rubric": f"{_AS_IN}, graded by the plugin's judge",
    "model-graded-closedqa": f"{_AS_IN} (Y/N), graded by the plugin's judge",
    "model-graded-factuality": "promptfoo's other name for `factuality`",
    "python": (
        f"{_AS_IN}: an expression, a body that `return`s, or `file://x.py[:fn]`; "
        "`config` is `context['config']`"
    ),
    "regex": f"{_AS_IN} (Python's `re`)",
    "starts-with": _AS_IN,
    "tool-call-f1": f"{_AS_IN} (tool names; passes at `threshold`, default 1)",
    "trajectory:step-count": "with `type: tool` (the plugin sees tool calls, not other spans)",
    "trajectory:tool-sequence": f"{_AS_IN} (`mode: exact | in_order`)",
    "trajectory:tool-used": f"{_AS_IN} (a name, names, or `{{name | pattern, min, max}}`)",
}
"""The promptfoo assertion types the plugin runs, and how.

``not-<type>`` of each runs too, but not of ``assert-set``.
"""

ALL_TYPES = frozenset({*INSTEAD, *SUPPORTED_TYPES})
"""Every assertion type promptfoo has (``promptfoo:redteam:*`` standing for the red team's)."""

ALIASES = {"model-graded-factuality": "factuality"}
"""promptfoo's other names of a type the plugin runs."""

TRANSFORM = (
    "transform the output inside a `python` assertion (`value: \"'HELLO' in output.upper()\"`, "
    "or a `file://` one that parses it first)"
)
"""What to write instead of promptfoo's ``transform`` (a JavaScript expression on the output)."""

DOCS = 'docs/reference/formats.md, section "promptfoo assertions"'


def unsupported(kind: str) -> str:
    """Why an assertion type does not run and what to write instead.

    For a typo, the type it is close to.
    """
    base = kind[4:] if kind.startswith("not-") else kind
    instead = INSTEAD.get("promptfoo:redteam:*" if base.startswith("promptfoo:redteam:") else base)
    docs = f"(see {DOCS})"
    if instead is not None and instead.startswith("none: "):
        return (
            f"not supported: assertion `{kind}`: {instead[6:]}; there is no equivalent here {docs}"
        )
    if instead is not None:
        return f"not supported: assertion `{kind}`; instead write {instead} {docs}"
    names = sorted({*ALL_TYPES, *(f"not-{t}" for t in ALL_TYPES)})
    close = difflib.get_close_matches(kind, names, n=1, cutoff=0.6)
    what = f' (did you mean "{close[0]}"?)' if close else ": not one of promptfoo's"
    return f"unknown assertion type `{kind}`{what}; promptfoo's types and what runs: {DOCS}"
