"""What a data file may read and make (SPEC §22): the files, the number of cases, the templates.

``file://`` references inside the project, regular files only, size-bounded; how many cases one file
may expand to; templates rendered in Jinja2's sandbox.

A data file is data, often from an untrusted pull request: it reads only what lies under the rootdir
(or a folder the user allowed with ``--agent-eval-allow-path`` / ini ``agent_eval_allow_paths``),
symlinks resolved before the check; a FIFO or a device is refused before it is opened, a file over
16 MiB before it is read. The plugin sets the folders at configure (``plugin/trust.py``),
``agent-eval validate`` from its arguments; unset, the working directory is the project.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

MAX_FILE_BYTES = 16 * 1024 * 1024
"""A ``file://`` reference larger than this is an error of its case (a prompt, a var, a tests file).
"""
MAX_CASES_PER_FILE = 100_000
"""How many cases one file may expand to; above it, one error of that file.

The expansion is tests × var lists × prompts × providers.
"""
MAX_TEMPLATE_VALUE = 1_000_000
"""How large a value a template's ``*`` or ``**`` may make; beyond, it is an error.

Counted in characters, items or digits.
"""
_GLOB_CHARS = frozenset("*?[")


class Refused(ValueError):
    """A reference a data file may not follow, or a file it may not read.

    The message names the path and why.
    """


class Trust(NamedTuple):
    """The folders data files may read under, and how many cases one file may make."""

    roots: tuple[Path, ...]
    max_cases: int = MAX_CASES_PER_FILE


_current: Trust | None = None


def configure(roots: list[Path], max_cases: int = MAX_CASES_PER_FILE) -> None:
    """Set the folders (resolved) and the bound for the run or the command."""
    global _current
    _current = Trust(tuple(dict.fromkeys(Path(r).resolve() for r in roots)), max_cases)


def reset() -> None:
    global _current
    _current = None


def current() -> Trust:
    """The run's settings; unset (a library call), the working directory is the project."""
    return _current if _current is not None else Trust((Path.cwd().resolve(),))


@contextmanager
def configured(roots: list[Path], max_cases: int = MAX_CASES_PER_FILE) -> Iterator[None]:
    """:func:`configure` for the span of a command, then the settings before it."""
    global _current
    before = _current
    configure(roots, max_cases)
    try:
        yield
    finally:
        _current = before


def _allowed_hint() -> str:
    return (
        "allow its folder with --agent-eval-allow-path DIR (ini agent_eval_allow_paths) "
        "if it is yours"
    )


def confined(path: Path, shown: str) -> Path:
    """``path`` resolved (symlinks followed), if it lies under an allowed folder.

    Else raise :class:`Refused`.
    """
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise Refused(f"{shown}: cannot resolve: {exc}") from None
    roots = current().roots
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        where = ", ".join(str(r) for r in roots)
        raise Refused(f"{shown}: outside the project ({where}); {_allowed_hint()}")
    return resolved


def read_bytes(path: Path, shown: str) -> bytes:
    """The bytes of a regular file under an allowed folder, at most :data:`MAX_FILE_BYTES`.

    Else raise :class:`Refused`. The file's kind and size are checked with ``stat`` before it is
    opened (a FIFO would block the open), and it is opened non-blocking without following a symlink
    planted after the check, then checked again.
    """
    resolved = confined(path, shown)
    try:
        info = os.stat(resolved)
        _check_kind(info, shown)
        flags = (
            os.O_RDONLY
            | getattr(os, "O_NONBLOCK", 0)
            | getattr(os, "O_NOFOLLOW", 0)
            | getattr(os, "O_CLOEXEC", 0)
        )
        fd = os.open(resolved, flags)
    except FileNotFoundError:
        raise Refused(f"{shown}: no such file") from None
    except OSError as exc:
        raise Refused(f"{shown}: cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        _check_kind(os.fstat(handle.fileno()), shown)
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise Refused(f"{shown}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    return data


def _check_kind(info: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{shown}: not a regular file (a FIFO, a device or a folder is never read)")
    if info.st_size > MAX_FILE_BYTES:
        raise Refused(
            f"{shown}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB ({info.st_size} bytes)"
        )


def read_text(path: Path, shown: str, encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded.

    Bytes that are not UTF-8 are :class:`Refused` naming the offset.
    """
    data = read_bytes(path, shown)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        byte = data[exc.start : exc.start + 1]
        raise Refused(
            f"{shown}: not UTF-8 (byte {exc.start}: {byte!r}); save it as UTF-8"
        ) from None


def glob(base: Path, pattern: str, shown: str) -> list[Path]:
    """The files ``pattern`` matches under ``base``, each under an allowed folder.

    The walk starts at the pattern's fixed part, itself checked first, so that ``../../**`` never
    walks the filesystem.
    """
    parts = Path(pattern).parts
    if Path(pattern).is_absolute():
        raise Refused(
            f"{shown}: an absolute glob is not followed; give a path relative to the config"
        )
    fixed: list[str] = []
    for part in parts:
        if _GLOB_CHARS & set(part):
            break
        fixed.append(part)
    rest = parts[len(fixed) :]
    if ".." in rest:
        raise Refused(f"{shown}: `..` after a wildcard is not followed")
    start = confined(base.joinpath(*fixed), shown)
    if not rest:
        return [start]
    found: list[Path] = []
    for match in start.glob(str(Path(*rest))):
        try:
            confined(match, shown)
        except Refused:
            continue  # a symlink out of the project: not a match
        found.append(match)
    return sorted(found)


def check_count(count: int, what: str) -> None:
    """:class:`Refused` when ``count`` cases exceed the bound."""
    bound = current().max_cases
    if count > bound:
        raise Refused(
            f"{what} expands to {count:,} cases, over the bound of {bound:,} per file "
            "(ini agent_eval_max_cases_per_file); split the file or shorten its var lists"
        )


# -- templates
# -------------------------------------------------------------------------------------------------


def _bounded(
    operator: str, left: Any, right: Any, table: dict[str, Callable[[Any, Any], Any]]
) -> Any:
    """``*`` and ``**`` of a template, refused when the result would be huge.

    A sandbox bounds ``range`` only.
    """
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            sized = isinstance(seq, (str, list, tuple)) and isinstance(times, int)
            if sized and len(seq) * times > MAX_TEMPLATE_VALUE:
                raise Refused(f"template: a repeated value over {MAX_TEMPLATE_VALUE:,} items")
    integers = operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0
    if integers and max(left.bit_length(), 1) * right > MAX_TEMPLATE_VALUE:
        raise Refused(f"template: a power over {MAX_TEMPLATE_VALUE:,} bits")
    return table[operator](left, right)


@functools.cache
def sandbox(undefined: str = "ChainableUndefined") -> Any:
    """Jinja2's ``ImmutableSandboxedEnvironment``, for the templates of data files.

    Attributes of internals, calls that change data, huge ranges and (here) huge ``*``/``**`` are
    errors, never code run. Jinja2 is imported here, with the first template.
    """
    import jinja2
    from jinja2 import sandbox as jinja_sandbox

    class Sandbox(jinja_sandbox.ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return _bounded(operator, left, right, self.binop_table)

    return Sandbox(
        undefined=getattr(jinja2, undefined), autoescape=False, keep_trailing_newline=True
    )
