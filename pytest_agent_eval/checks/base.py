"""The check protocol and the registry that maps ``expect:`` keys to checks.

It also says how a per-turn result is named. A check's result, ``CheckResult``, is one of the shared
words in ``core.results``.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from pytest_agent_eval.core.model import model
from pytest_agent_eval.core.results import CheckResult, RunRecord
from pytest_agent_eval.faults import describe
from pytest_agent_eval.traffic.clients import infrastructure_error

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case


@model
class CheckContext:
    """What a check may need beyond the run: the case and the session's settings."""

    case: Case
    options: dict[str, Any] = field(default_factory=dict)
    llm: Callable[..., str] | None = None
    """``agent_eval_llm``: ``(messages, **options) -> str``; call it through ``llm.ask``.

    ``llm.ask`` leaves out the options it cannot take.
    """


class CheckError(Exception):
    """Raised by a check that cannot reach a verdict.

    Its message is shown as is and the check errors.
    """


class Check(Protocol):
    """A check: given the run, its ``expect:`` value and the context, a result."""

    def __call__(self, run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult: ...


class CheckSpec(NamedTuple):
    """A registered check: the function and the JSON Schema of its ``expect:`` value."""

    name: str
    func: Check
    schema: dict[str, Any]
    description: str = ""
    uses_llm: bool = False
    """The check may call ``agent_eval_llm``: the item fetches that fixture."""
    blocking: bool = True
    """The check may block (I/O, sleeps, user code, the LLM): it runs in a worker thread.

    It runs off the event loop, so that it never holds up other cases. Pure, fast checks declare
    ``blocking=False`` and run on the loop.
    """


class CheckRegistry:
    """Checks by name. Plugins add theirs through ``pytest_agent_eval_register_checks``.

    A built-in family of checks is registered by name only (:meth:`register_family`): its module
    is imported the first time one of its checks is looked up, so a run loads the families its
    files name and no other.
    """

    def __init__(self) -> None:
        self._checks: dict[str, CheckSpec | str] = {}
        """Every check by name: its spec, or the module of its family while that is not loaded."""
        self.modifiers: dict[str, dict[str, Any]] = {}
        """``expect:`` keys that tune other checks (``case_sensitive``), with their schema."""
        self.version = 0
        """Counts registrations.

        What is derived from the registry (the compiled schema) is kept per version.
        """
        self._builtin: dict[str, CheckSpec] = {}
        self._builtin_families: set[str] = set()
        self._lock = threading.Lock()

    def register(
        self,
        name: str,
        func: Check,
        schema: dict[str, Any] | None = None,
        description: str = "",
        *,
        uses_llm: bool = False,
        blocking: bool = True,
    ) -> None:
        """Add (or replace) the check ``name``.

        ``uses_llm`` when it may call the LLM (``ctx.llm``); ``blocking=False`` only for a pure,
        fast check that is safe to run on the event loop (an LLM check always runs off it).
        """
        spec = CheckSpec(
            name,
            func,
            schema if schema is not None else {},
            description,
            uses_llm,
            blocking or uses_llm,
        )
        self._checks[name] = spec
        self.version += 1

    def register_family(self, module: str, names: Iterable[str]) -> None:
        """Add the checks ``names`` of the family ``module`` without importing it.

        ``module``'s ``register(registry)`` registers exactly ``names``; it is imported when one of
        them is first looked up. A check registered under the same name later replaces its
        family's, as :meth:`register` does.
        """
        for name in names:
            self._checks[name] = module
        self.version += 1

    def _spec(self, name: str) -> CheckSpec:
        entry = self._checks[name]
        if isinstance(entry, CheckSpec):
            return entry
        self._load(entry)
        return cast(CheckSpec, self._checks[name])

    def _load(self, module: str) -> None:
        """Import the family ``module`` and fill in those of its checks that nothing replaced."""
        with self._lock:
            own = CheckRegistry()
            # __import__, not importlib.import_module: `python -X importtime` shows it
            __import__(module, fromlist=["register"]).register(own)
            for spec in own:
                if self._checks.get(spec.name) == module:
                    self._checks[spec.name] = spec
                    if module in self._builtin_families:
                        self._builtin[spec.name] = spec
            missing = [name for name, entry in self._checks.items() if entry == module]
            if missing:
                raise LookupError(f"check family {module} did not register {missing}")

    def uses_llm(self, names: Iterable[str]) -> bool:
        """Whether any of the checks ``names`` may call the LLM."""
        return any(name in self._checks and self._spec(name).uses_llm for name in names)

    def case_uses_llm(self, case: Case) -> bool:
        """Whether ``case`` may call the LLM.

        It may with a simulated user, or a check of its own or of one of its turns.
        """
        if case.simulated_user is not None:
            return True
        return self.uses_llm(case.expect) or any(self.uses_llm(turn.expect) for turn in case.turns)

    def blocking(self, names: Iterable[str]) -> bool:
        """Whether any of the checks ``names`` may block (and so runs off the event loop)."""
        return any(name in self._checks and self._spec(name).blocking for name in names)

    def mark_builtin(self) -> None:
        """The checks registered so far are the built-in ones.

        Those are pure when non-blocking: see :meth:`need_no_loop`. A family's checks are marked
        when it loads.
        """
        self._builtin = {
            name: spec for name, spec in self._checks.items() if isinstance(spec, CheckSpec)
        }
        self._builtin_families = {e for e in self._checks.values() if isinstance(e, str)}

    def need_no_loop(self, names: Iterable[str]) -> bool:
        """Whether the checks ``names`` run the same without a running event loop.

        Blocking ones run off it anyway and the built-in non-blocking ones are pure; a plugin's
        non-blocking check was promised the loop.
        """
        checks, builtin = self._checks, self._builtin
        for name in names:
            if name not in checks:
                continue
            spec = self._spec(name)
            if not (spec.blocking or builtin.get(name) is spec):
                return False
        return True

    def __contains__(self, name: object) -> bool:
        return name in self._checks

    def __getitem__(self, name: str) -> CheckSpec:
        return self._spec(name)

    def __iter__(self) -> Iterator[CheckSpec]:
        return iter([self._spec(name) for name in list(self._checks)])

    def names(self) -> list[str]:
        return list(self._checks)


def evaluate(
    run: RunRecord, expect: dict[str, Any], ctx: CheckContext, registry: CheckRegistry
) -> list[CheckResult]:
    """Every check of ``expect`` on ``run``.

    A check that raises errors (no verdict) with the error.
    """
    results = []
    for name, spec in expect.items():
        try:
            result = registry[name].func(run, spec, ctx)
            if not _finite(result.score):
                raise CheckError(f"the check's score {result.score!r} is not a finite number")
            results.append(result)
        except Exception as exc:
            why = str(exc) if isinstance(exc, CheckError) else f"check raised {describe(exc)}"
            infra = infrastructure_error(exc)
            results.append(
                CheckResult(
                    name,
                    False,
                    0.0,
                    spec,
                    f"no verdict: {why}",
                    why,
                    scored=False,
                    error=True,
                    infra_error=infra,
                )
            )
    return results


_TURN = re.compile(r"^turn \d+: ")

TOOL_SELECTION_CHECKS = frozenset(
    {"tools_called", "tools_not_called", "tools_exactly", "tool_sequence", "tools_in_order",
     "tool_selection", "tool_usage"}
)  # fmt: skip
"""The checks that judge which tools the agent chose.

Their mean score is the tool-selection accuracy.
"""


def in_turn(n: int, name: str) -> str:
    """The name of check ``name``'s result on turn ``n`` of a scripted conversation.

    The name is ``turn N: name``.
    """
    return f"turn {n}: {name}"


def check_name(result_name: str) -> str:
    """The check a result's name is of: the name without its ``turn N: `` prefix (``in_turn``)."""
    return _TURN.sub("", result_name, count=1)


def _finite(score: object) -> bool:
    """Whether ``score`` is a real number that is not NaN or infinite.

    Anything else has no verdict.
    """
    return isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)


def first_infra_error(results: Iterable[CheckResult]) -> str | None:
    """The first infrastructure failure of the checks' own LLM requests, if any."""
    return next((r.infra_error for r in results if r.infra_error), None)
