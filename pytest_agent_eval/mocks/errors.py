"""What tool mocks raise: a mock configuration that cannot be used, a mocked error, an unmocked call."""

from __future__ import annotations


class ToolMockError(Exception):
    """Raised by a ``{raise: "Type: message"}`` response whose ``Type`` is not a builtin exception."""


class UnmockedToolError(Exception):
    """Raised by a call to a tool that has no response for the running case (``unmocked_tools: strict``)."""


class MockConfigError(ValueError):
    """A tool mock, patch target or responses file that cannot be used; the message says where and what to do."""
