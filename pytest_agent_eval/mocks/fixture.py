"""The ``tool_mocks`` fixture's object.

It patches a dispatcher or a tool, wraps tool objects and reads the calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pytest_agent_eval.core.results import ToolCall
from pytest_agent_eval.core.tool_errors import MockConfigError
from pytest_agent_eval.mocks.patching import Key, install, key_of, patched_target, uninstall
from pytest_agent_eval.mocks.recording import MockPlan, Recording
from pytest_agent_eval.mocks.standins import check_dispatcher, dispatcher, wrap

if TYPE_CHECKING:
    from pytest_agent_eval.adapters import AdapterRegistry

T = TypeVar("T")


class ToolMocks:
    """What the ``tool_mocks`` fixture gives: patch a dispatcher or a tool, wrap tools, read calls.

    Patches last until :meth:`undo` (the fixture's teardown). Calls are answered from the running
    case's ``tool_mocks`` and recorded per trial; outside a running case the real tools run.
    """

    def __init__(self, held: bool = False, adapters: AdapterRegistry | None = None) -> None:
        self._adapters = adapters
        """The session's adapters, which know the tool objects of frameworks.

        The built-in ones when not given.
        """
        self._held = held
        """Patches kept for the session for cases started early.

        They do not count as patched for other cases.
        """
        self._patches: list[Key] = []
        self._recordings: list[Recording] = []

    def patch(self, target: str) -> Callable[..., Any]:
        """Patch the dispatcher ``(name, args) -> result`` at ``module:attr``.

        Each call is recorded as tool ``name``.

        Also patched: modules that imported it by the same name (``from pkg.mod import
        dispatch_tool``). References kept elsewhere (a dict, a closure, a default argument) are not
        reached.
        """

        def make(original: Any) -> Any:
            if not callable(original):
                raise MockConfigError(
                    f"{target}: expected a dispatcher function, got {type(original).__name__}"
                )
            check_dispatcher(original, target)
            return dispatcher(original, target)

        key, standin = install(target, make, dispatcher=True, held=self._held)
        self._patches.append(key)
        return cast(Callable[..., Any], standin)

    def patch_tool(self, target: str) -> Any:
        """Patch one tool at ``module:attr`` with its :func:`wrap` stand-in.

        The tool is a function or a LangChain tool.
        """

        def make(original: Any) -> Any:
            try:
                return wrap(original, self._adapters)
            except TypeError as exc:
                raise MockConfigError(f"{target}: {exc}") from None

        key, standin = install(target, make, dispatcher=False, held=self._held)
        self._patches.append(key)
        return standin

    def wrap(self, tool: T) -> T:
        """A mocked stand-in for a tool object a framework is handed (see :func:`wrap`)."""
        return wrap(tool, self._adapters)

    @property
    def calls(self) -> list[ToolCall]:
        """The calls recorded for the current test's case so far.

        Every trial, trial by trial, in call order.
        """
        return [call for recording in self._recordings for call in recording.calls]

    def recorder(
        self, plan: MockPlan, dispatch: str | None = None
    ) -> Callable[[Any], AbstractContextManager[Recording]]:
        """The runner's per-trial recorder for ``plan``; its recordings feed :attr:`calls`.

        The case's patches: this object's (the test's), or of patches held for the session, only
        ``dispatch`` (the case's own).
        """
        keys = ([key_of(dispatch)] if dispatch else []) if self._held else self._patches
        patches = frozenset(patched_target(key) for key in keys)
        if self._held:  # held for the session (cases started early): nobody reads its calls, and
            return lambda case: plan.record(patches)  # a run's worth would pile up

        @contextlib.contextmanager
        def record(case: Any) -> Iterator[Recording]:
            with plan.record(patches) as recording:
                self._recordings.append(recording)
                yield recording

        return record

    def undo(self) -> None:
        """Undo this object's patches.

        The last user of a patched attribute restores the original.
        """
        while self._patches:
            uninstall(self._patches.pop(), self._held)
