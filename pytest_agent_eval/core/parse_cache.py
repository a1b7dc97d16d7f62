"""A parse cache for YAML eval files, keyed by file content, kept in pytest's cache directory.

YAML parsing is the slowest part of collecting a large golden set; a second collection of an
unchanged file reads the parsed data and its line positions back instead. ``marshal`` is used
because it is fast and, unlike pickle, cannot run code when loading.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# Part of every key: a new Python (marshal format) or plugin version never reads an old entry.
_SALT = f"{sys.version_info[:2]}-{marshal.version}-3".encode()


class ParseCache:
    """Parsed documents by content hash, one file per entry in ``directory``."""

    def __init__(self, directory: Path):
        self.directory = directory

    def _digest(self, text: str) -> str:
        return hashlib.blake2b(
            text.encode("utf-8", "surrogatepass"), digest_size=32, key=_SALT[:64]
        ).hexdigest()

    def get(self, text: str) -> tuple[Any, ...] | None:
        """The entry stored for this content, or ``None``.

        An entry holds the digest of the content it was made from: a file copied or written over
        another entry's name is not read as this content's.
        """
        digest = self._digest(text)
        try:
            entry = marshal.loads((self.directory / f"{digest[:40]}.marshal").read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            return None
        if (
            not isinstance(entry, tuple)
            or len(entry) != 2
            or entry[0] != digest
            or not isinstance(entry[1], tuple)
        ):
            return None
        return entry[1]

    def put(self, text: str, entry: tuple[Any, ...]) -> None:
        """Store an entry atomically; values marshal cannot hold (e.g.

        YAML timestamps) are not cached.
        """
        digest = self._digest(text)
        try:
            blob = marshal.dumps((digest, entry))
        except ValueError:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(blob)
            os.replace(tmp, self.directory / f"{digest[:40]}.marshal")
        except OSError:
            return  # a read-only or full cache directory only costs speed
