"""A parse cache for YAML eval files, keyed by file content, kept in pytest's cache directory.

YAML parsing is the slowest part of collecting a large golden set; a second collection of an unchanged file
reads the parsed data and its line positions back instead. ``marshal`` is used because it is fast and, unlike
pickle, cannot run code when loading.
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
_SALT = f"{sys.version_info[:2]}-{marshal.version}-2".encode()


class ParseCache:
    """Parsed documents by content hash, one file per entry in ``directory``."""

    def __init__(self, directory: Path):
        self.directory = directory

    def _entry(self, text: str) -> Path:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20, key=_SALT[:64]).hexdigest()
        return self.directory / f"{digest}.marshal"

    def get(self, text: str) -> tuple[Any, ...] | None:
        """The entry stored for this content, or ``None``."""
        try:
            entry = marshal.loads(self._entry(text).read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            return None
        return entry if isinstance(entry, tuple) else None

    def put(self, text: str, entry: tuple[Any, ...]) -> None:
        """Store an entry atomically; values marshal cannot hold (e.g. YAML timestamps) are not cached."""
        try:
            blob = marshal.dumps(entry)
        except ValueError:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(blob)
            os.replace(tmp, self._entry(text))
        except OSError:
            return  # a read-only or full cache directory only costs speed
