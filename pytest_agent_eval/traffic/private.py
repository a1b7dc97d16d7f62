"""A private per-user state directory (SPEC §22).

Where the pace store lives when pytest's cache is off.

Never a predictable shared path another local user could plant a symlink or a file in: the folder is
``$XDG_RUNTIME_DIR/pytest-agent-eval`` (a per-user folder the system made) or
``<temp>/pytest-agent-eval-<uid>``, created mode 0700, checked with ``lstat`` (not a symlink, a
folder, owned by this user, no access for others) before use; a file in it is opened without
following a symlink (:func:`open_private`).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

NAME = "pytest-agent-eval"


class PrivateDirError(OSError):
    """The private folder cannot be made or is not private; the message names it and what to do."""


def _uid() -> int | None:
    getuid = getattr(os, "geteuid", None)
    return getuid() if getuid is not None else None  # Windows: per-user temp folders, no uid


def base() -> Path:
    """The user's private folder, made and checked."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute():
        try:
            return ensure(Path(runtime) / NAME, parent_checked=_is_private(Path(runtime)))
        except PrivateDirError:
            pass  # an XDG_RUNTIME_DIR not ours: the temp folder's below
    uid = _uid()
    return ensure(Path(tempfile.gettempdir()) / (f"{NAME}-{uid}" if uid is not None else NAME))


def folder(name: str) -> Path:
    """A sub-folder of :func:`base` (``name`` one path part), made and checked as private."""
    if not name or "/" in name or os.sep in name or name in (".", ".."):
        raise ValueError(f"not a folder name: {name!r}")
    return ensure(base() / name, parent_checked=True)


def _is_private(path: Path) -> bool:
    try:
        _check(path, os.lstat(path))
    except (OSError, PrivateDirError):
        return False
    return True


def ensure(path: Path, parent_checked: bool = False) -> Path:
    """``path`` as a private folder.

    Made 0700 if missing; refused when it is a symlink, not a folder, or another user's; a folder of
    ours that others may enter is made 0700.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise PrivateDirError(
            f"cannot make the private folder {path}: {exc.strerror or exc}"
        ) from None
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise PrivateDirError(
            f"cannot check the private folder {path}: {exc.strerror or exc}"
        ) from None
    _check(path, info)
    if stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700, follow_symlinks=False)
        except (OSError, NotImplementedError) as exc:
            raise PrivateDirError(
                f"the private folder {path} is open to others and cannot be closed: {exc}"
            ) from None
    return path


def _check(path: Path, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise PrivateDirError(
            f"the private folder {path} is a symlink (another user's trap?): remove it"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise PrivateDirError(f"the private folder {path} is not a folder: remove it")
    uid = _uid()
    if uid is not None and info.st_uid != uid:
        raise PrivateDirError(
            f"the private folder {path} belongs to another user (uid {info.st_uid}): remove it, "
            "or set TMPDIR"
        )


def open_private(path: Path, flags: int = os.O_RDWR | os.O_CREAT) -> int:
    """A file descriptor of ``path`` opened without following a symlink.

    Mode 0600 when made; ``OSError`` (ELOOP) on a symlink.
    """
    extra = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags | extra, 0o600)
