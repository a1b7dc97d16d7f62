"""Eval files as pytest collectors and eval cases as pytest items.

The items are ``pytest.Function`` subclasses.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_agent_eval import compat, gc_policy
from pytest_agent_eval.core.names import TAG_RE
from pytest_agent_eval.plugin import injection
from pytest_agent_eval.plugin.skipping import fail_item, relative
from pytest_agent_eval.plugin.state import EVAL_ITEM, get_state
from pytest_agent_eval.plugin.stopping import STOPS
from pytest_agent_eval.text import printable

if TYPE_CHECKING:  # the case model loads with the first file read
    from pytest_agent_eval.core.case import Case, LoadedFile
    from pytest_agent_eval.core.errors import EvalFileError

# Tags with these names would change how a case runs if they became markers; they stay keywords
# (-k).
RESERVED_TAGS = frozenset(
    {
        "skip", "skipif", "xfail", "usefixtures", "parametrize", "filterwarnings", "timeout",
        "flaky", "xdist_group", "asyncio", "anyio", "trio", "tryfirst", "trylast", "no_cover",
        "order", "dependency", "repeat", "django_db", "agent_eval",
    }
)  # fmt: skip


class EvalFile(pytest.File):
    """A YAML or JSON file of eval cases."""

    def collect(self) -> list[pytest.Item]:
        # A large file makes ~10 long-lived objects per case: the cyclic GC would scan them over and
        # over while
        # they are made, and find nothing to free (about a third of collection time at 10,000
        # cases).
        gc_policy.no_sweep_at_exit()
        with gc_policy.paused():
            items = list(self._items())
        get_state(self.config).eval_items += len(items)
        return items

    def _items(self) -> Iterator[pytest.Item]:
        # The reader, dialects and checks load here: pytest makes an EvalFile for every eval file
        # beside a test
        # file it was asked to run, and collects only the one asked for.
        from pytest_agent_eval.cases.load import load_file
        from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors
        from pytest_agent_eval.core.files import sidecar_stem

        state = get_state(self.config)
        try:
            if sidecar_stem(self.path) is not None:  # collected only when no dataset is beside it
                from pytest_agent_eval.cases.dialects.dataset_rows import orphan_error

                raise orphan_error(self.path)
            loaded = load_file(self.path, state.checks, state.dialects, cache=state.parse_cache)
        except (EvalFileError, EvalFileErrors) as exc:
            # Not a collection error: pytest would interrupt the whole run, and one bad file must
            # not.
            errors = exc.errors if isinstance(exc, EvalFileErrors) else [exc]
            yield FileProblem.from_parent(self, name=FileProblem.NAME, errors=errors)
            return
        except (
            Exception
        ) as exc:  # a file is data (SPEC §22): what reading it raises is its error, not the run's
            why = f"cannot be read: {type(exc).__name__}: {exc} (please report this as a bug)"
            yield FileProblem.from_parent(
                self, name=FileProblem.NAME, errors=[EvalFileError(self.path, 1, why)]
            )
            return
        if loaded.notes:
            from pytest_agent_eval.cases.dialects.dataset_rows import NoSidecarWarning

            for note in loaded.notes:
                self.warn(NoSidecarWarning(relative(note, self.config)))
        if (
            loaded.mcp_servers
        ):  # the stand-in MCP servers the file declares, started before its cases run
            from pytest_agent_eval.plugin.mcp import declare

            declare(self.config, loaded.mcp_servers)
        fixtureinfo = None
        cases: Iterable[Case] = matrix_variants(loaded, state.settings.matrix)
        if injection.wanted(self.config, loaded.cases):  # a case's `inject:` or --agent-eval-inject
            cases = injection.expand(self.config, cases)
        for case in cases:
            # Every case of a file runs the same function under the same node: one fixture closure
            # serves all,
            # as it does for a parametrized test.
            item = EvalItem.from_parent(self, name=case.id, case=case, fixtureinfo=fixtureinfo)
            fixtureinfo = compat.fixtureinfo(item)
            yield item


def matrix_variants(loaded: LoadedFile, matrix: tuple[tuple[str, str], ...]) -> Iterator[Case]:
    """The file's cases, each as one variant ``case[name]`` per matrix agent.

    The matrix agents are ``--agent-eval-agent``'s, else the file's ``agents:``. A case with its own
    ``agent:`` or an error stays one item.
    """
    agents: list[tuple[str, str | dict[str, Any], int | None]] = [
        (name, ref, None) for name, ref in matrix
    ] or [(name, ref, line) for name, (ref, line) in loaded.agents.items()]
    for case in loaded.cases:
        if not agents or case.own_agent or case.error:
            yield case
            continue
        for name, ref, line in agents:
            yield dataclasses.replace(
                case, id=f"{case.id}[{name}]", agent=ref, agent_line=line, agent_name=name
            )


class FileProblem(pytest.Item):
    """Stands for a file that cannot be read as eval cases.

    It errors at setup with the file's problems.
    """

    NAME = "@file"  # case ids never contain "@", so this cannot clash with a case

    def __init__(self, *, errors: list[EvalFileError], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.errors = errors
        self.add_marker("agent_eval")
        self.stash[EVAL_ITEM] = True

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, (self.errors[0].line or 1) - 1, "eval file error"

    def setup(self) -> None:
        message = "\n".join(e.format() for e in self.errors)
        # raised `from None`: called while handling the cause, whose own traceback would only add
        # noise
        raise pytest.fail.Exception(relative(message, self.config), pytrace=False) from None

    def runtest(self) -> None:  # never reached: setup fails
        raise AssertionError("unreachable")


def agent_eval_case(request: pytest.FixtureRequest) -> None:
    """Runs one eval case: the test function behind every eval item.

    That is when pytest keeps no request on the item (:func:`compat.item_keeps_request`); else
    :meth:`EvalItem.run_case` is.
    """
    from pytest_agent_eval.plugin.prepare import user_error

    __tracebackhide__ = user_error
    item = request.node
    assert isinstance(item, EvalItem)
    item.run_case(request)


@functools.cache
def _execute() -> ModuleType:
    """``plugin.execute``: the runner loads with the first case run, then no import per item."""
    from pytest_agent_eval.plugin import execute

    return execute


class EvalItem(pytest.Function):
    """One eval case.

    A ``pytest.Function`` so that fixtures (autouse, conftest, any scope) apply.
    """

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        # No `originalname`: pytest 9.2 builds the node id from it; the callable is given, so
        # nothing looks it up.
        super().__init__(
            callobj=self.run_case if compat.item_keeps_request() else agent_eval_case, **kwargs
        )
        compat.bracketed_node_id(self)  # `case[variant]`: --lf matches it on pytest >= 9.2
        self.case = case
        state = get_state(self.config)
        self.add_marker(state.marker("agent_eval"))
        self.stash[EVAL_ITEM] = True
        for tag in case.tags:
            if tag in RESERVED_TAGS or not TAG_RE.match(
                tag
            ):  # loaders reject other names; a plugin's may not
                self.extra_keyword_matches.add(tag)
            else:
                self.add_marker(state.marker(tag))
        if case.skip:
            self.add_marker(pytest.mark.skip(reason=case.skip))
        if case.xfail:
            self.add_marker(pytest.mark.xfail(reason=case.xfail))
        if case.description:
            self.extra_keyword_matches.add(case.description)
        if case.stop_on_failure:
            self.stash[STOPS] = True

    def run_case(self, request: pytest.FixtureRequest | None = None) -> None:
        """Runs the eval case: the test function behind the item.

        pytest passes no argument: a parameter with a default is no fixture. The request pytest
        keeps on the item is used unless ``request`` is given.
        """
        execute = _execute()
        __tracebackhide__ = execute.user_error
        execute.run_item(self, self.case, request or compat.item_request(self))

    def reportinfo(self) -> tuple[Path, int, str]:
        return (
            self.path,
            self.case.line - 1,
            self.case.id
            + (f": {printable(self.case.description)}" if self.case.description else ""),
        )

    def setup(self) -> None:
        if self.case.error:  # an invalid case errors at setup, so it reads as ERROR, not FAILED
            self.fail(self.case.error)
        super().setup()

    def fail(self, message: str) -> NoReturn:
        """Fail with ``message`` alone (``skipping.fail_item``)."""
        fail_item(self, message)
