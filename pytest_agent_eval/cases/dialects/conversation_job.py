"""Conversation-evaluation job YAML (SPEC §12): one job, two items, without and with the facts.

The items are ``<job id>[without_facts]`` and ``<job id>[with_facts]`` (the home project ran every
job twice; only the second may reveal the facts).

``evaluator`` → the simulated user (name, voice, signoff, temperature); ``aspirationalAverage`` (ms)
→ the timing target; ``tasks`` (``acceptanceCriteria``) → scored tasks; ``assertions`` →
post-conversation assertions (``cypher`` + ``expected``, ``expression``); ``target`` and ``seeds`` →
``context``; ``setups`` (Cypher) run before the conversation; ``maxTurns`` counts every message
(default 20). The composite is the home project's ``max(0, (timing + 2·task + 4·assertion)/7 −
min(0.3·failures, 0.5))``, each agent call retried up to 3 times.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Problems, is_number, pretty
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.conversation import DEFAULT_WEIGHTS, SimulatedUser, Task, assertion
from pytest_agent_eval.core.document import Document, PathKey
from pytest_agent_eval.core.errors import EvalFileErrors
from pytest_agent_eval.core.names import ID_RE, slugify

NAME = "conversation_job"
JOB_KEYS = (
    "evaluator", "target", "aspirationalAverage", "tasks", "facts", "assertions", "seeds",
    "greetings", "maxTurns", "setups", "scorer",
)  # fmt: skip
EVALUATOR_KEYS = ("name", "voice", "signoff", "temperature", "prompt")
TASK_KEYS = ("type", "task", "acceptanceCriteria")
ASSERTION_KEYS = ("cypher", "expected", "expression", "weight")
SCORER_KEYS = ("prompt", "temperature")
HOME_GREETINGS = ("Hello", "Hi", "Greetings", "Yo", "Hey")
HOME_RETRIES = 3
"""The home project retried each agent call up to 3 times (4 attempts); each failed attempt counted.
"""
VARIANTS = ("without_facts", "with_facts")


def detect(data: Any) -> tuple[bool, str]:
    """A mapping with ``evaluator`` or ``aspirationalAverage`` (and no native ``cases``)."""
    need = "a mapping with `evaluator:` (or `aspirationalAverage:`) and `tasks:`"
    if (
        isinstance(data, dict)
        and "cases" not in data
        and {"evaluator", "aspirationalAverage"} & data.keys()
    ):
        return True, ""
    return False, need


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """The job's two items.

    A problem with the job errors the file with every problem at its line.
    """
    data: dict[str, Any] = doc.data
    stem = (
        doc.path.stem.split(".")[0]
        if doc.path.name.endswith((".eval.yaml", ".eval.yml"))
        else doc.path.stem
    )
    job_id = stem if ID_RE.match(stem) else slugify(stem)
    problems = Problems(doc)
    problems.unknown_keys(data, JOB_KEYS, (), "job")
    evaluator = _mapping(problems, data, "evaluator", EVALUATOR_KEYS)
    scorer = _mapping(problems, data, "scorer", SCORER_KEYS)
    tasks = _tasks(problems, data)
    facts = problems.str_list(data, "facts", ()) or []
    greetings = problems.str_list(data, "greetings", ()) or list(HOME_GREETINGS)
    average = data.get("aspirationalAverage")
    if average is not None and (not is_number(average) or average <= 0):
        problems.add(
            ("aspirationalAverage",),
            f"aspirationalAverage: expected milliseconds > 0, got {average!r}",
        )
    max_turns = data.get("maxTurns", 20)
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 2:
        problems.add(
            ("maxTurns",), f"maxTurns: expected a whole number of messages ≥ 2, got {max_turns!r}"
        )
    assertions = _assertions(problems, doc, data)
    setups = _setups(problems, data)
    target = data.get("target")
    if target is not None and not isinstance(target, dict):
        problems.add(("target",), f"target: expected a mapping (user, chatbot), got {target!r}")
    for key in ("name", "voice", "signoff"):
        problems.string(evaluator, key, ("evaluator",))
    for where, block in (("evaluator", evaluator), ("scorer", scorer)):
        value = block.get("temperature")
        if value is not None and not is_number(value):
            problems.add(
                (where, "temperature"), f"{where}.temperature: expected a number, got {value!r}"
            )
    if problems:
        raise EvalFileErrors(problems.in_order())
    context: dict[str, Any] = {}
    if target is not None:
        context["target"] = target
    if "seeds" in data:
        context["seeds"] = data["seeds"]
    line = doc.line(("evaluator",) if "evaluator" in data else ("tasks",))
    cases = []
    for variant in VARIANTS:
        user = SimulatedUser(
            tasks=tuple(tasks),
            name=str(evaluator.get("name", "Socrates")),
            voice=str(evaluator.get("voice", "You speak like a friendly, relaxed human")),
            greetings=tuple(greetings),
            facts=tuple(facts) if variant == "with_facts" else (),
            signoff=str(evaluator.get("signoff", "So Long, and Thanks for All the Fish")),
            max_turns=max_turns,
            temperature=float(evaluator.get("temperature", 0.5)),
            retries=HOME_RETRIES,
            aspirational_latency_s=average / 1000.0 if average is not None else None,
            weights=dict(DEFAULT_WEIGHTS),
            assertions=tuple(assertions),
            setups=tuple(setups),
            scorer_temperature=float(scorer.get("temperature", 0.0)),
            variant=variant,
        )
        cases.append(
            Case(
                id=f"{job_id}[{variant}]",
                path=doc.path,
                line=line,
                context=context,
                description=(
                    f"{evaluator.get('name', 'Socrates')}: {len(tasks)} tasks, "
                    f"{variant.replace('_', ' ')}"
                ),
                simulated_user=user,
                min_score=0.7,
                dialect=NAME,
                metadata={"facts supplied": variant == "with_facts"},
            )
        )
    return LoadedFile(doc.path, NAME, cases)


def _mapping(
    problems: Problems, data: dict[str, Any], name: str, keys: tuple[str, ...]
) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add((name,), f"{name}: expected a mapping, got {value!r}")
        return {}
    problems.unknown_keys(value, keys, (name,), name)
    return value


def _items(
    problems: Problems, raw: list[Any], name: str, keys: tuple[str, ...]
) -> Iterator[tuple[PathKey, dict[str, Any]]]:
    """The mappings of the list ``name`` with their keys.

    A problem for any other item and any unknown key.
    """
    for n, item in enumerate(raw):
        key: PathKey = (name, n)
        if not isinstance(item, dict):
            problems.add(
                key, f"{pretty(key)}: expected a mapping ({', '.join(keys)}), got {item!r}"
            )
            continue
        problems.unknown_keys(item, keys, key, name[:-1])
        yield key, item


def _tasks(problems: Problems, data: dict[str, Any]) -> list[Task]:
    raw = data.get("tasks")
    if not isinstance(raw, list) or not raw:
        problems.add(
            ("tasks",) if "tasks" in data else (),
            "a conversation job needs `tasks:`, a list of {type, task, acceptanceCriteria}"
            + (f", got {raw!r}" if "tasks" in data else ""),
        )
        return []
    tasks = []
    for key, item in _items(problems, raw, "tasks", TASK_KEYS):
        text = problems.string(item, "task", key, "what the simulated user pursues")
        criteria = problems.string(item, "acceptanceCriteria", key, "how the task is scored")
        kind = item.get("type", "task")
        if kind not in ("task", "question"):
            problems.add(
                (*key, "type"), f"{pretty(key)}.type: expected task or question, got {kind!r}"
            )
        tasks.append(Task(str(text), str(criteria), str(kind)))
    return tasks


def _assertions(problems: Problems, doc: Document, data: dict[str, Any]) -> list[Any]:
    raw = data.get("assertions") or []
    if not isinstance(raw, list):
        problems.add(("assertions",), f"assertions: expected a list, got {raw!r}")
        return []
    out = []
    for key, item in _items(problems, raw, "assertions", ASSERTION_KEYS):
        kinds = [k for k in ("cypher", "expression") if k in item]
        if len(kinds) != 1:
            problems.add(
                key,
                f"{pretty(key)}: "
                "an assertion needs either `cypher` (with `expected`) or `expression`",
            )
            continue
        if kinds == ["cypher"] and "expected" not in item:
            problems.add(
                key,
                f"{pretty(key)}: "
                "a `cypher` assertion needs `expected` (the value the query returns)",
            )
        problems.string(item, kinds[0], key)
        weight = item.get("weight", 1)
        if not is_number(weight) or weight < 0:
            problems.add(
                (*key, "weight"), f"{pretty(key)}.weight: expected a number ≥ 0, got {weight!r}"
            )
            continue
        out.append(assertion(item, doc.line(key)))
    return out


def _setups(problems: Problems, data: dict[str, Any]) -> list[str]:
    """Cypher scripts: strings, or mappings with one string (``{cypher: ...}``)."""
    raw = data.get("setups") or []
    out = []
    for n, item in enumerate(raw if isinstance(raw, list) else [raw]):
        if isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), str):
            item = next(iter(item.values()))
        if not isinstance(item, str):
            problems.add(
                ("setups", n), f"setups[{n}]: expected a Cypher script (a string), got {item!r}"
            )
            continue
        out.append(item)
    return out


DIALECT = Dialect(NAME, detect, load)
