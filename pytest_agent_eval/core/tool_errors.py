"""The errors tool mocks raise: an unusable mock configuration, a mocked error, an unmocked call."""

from __future__ import annotations


class ToolMockError(Exception):
    """Raised by a ``{raise: "Type: message"}`` response whose ``Type`` is no builtin exception."""


class UnmockedToolError(Exception):
    """Raised by a call to a tool that has no response for the running case.

    Raised under ``unmocked_tools: strict``.
    """

    def __init__(self, message: str, violation: str | None = None) -> None:
        super().__init__(message)
        self.violation = violation or message
        """The line a failure shows.

        It names the call, its arguments, the case's ``path:line`` and what to do.
        """


def unmocked_stop(exc: BaseException) -> UnmockedToolError | None:
    """The unmocked-tool error behind ``exc``, if any.

    It is ``exc`` itself, or what it was raised from or during (a framework that wraps a tool's
    error, a task group's exception group).
    """
    todo, seen = [exc], set()
    while todo:
        found = todo.pop()
        if isinstance(found, UnmockedToolError):
            return found
        if id(found) in seen:
            continue
        seen.add(id(found))
        group = getattr(found, "exceptions", None)
        nested = (
            [e for e in group if isinstance(e, BaseException)] if isinstance(group, tuple) else []
        )
        todo += [e for e in (found.__cause__, found.__context__) if e is not None] + nested
    return None


class MockConfigError(ValueError):
    """A tool mock, patch target or responses file that cannot be used.

    The message says where and what to do.
    """
