"""Read YAML and JSON files into plain data plus the line of every mapping key and list item."""

from __future__ import annotations

import contextlib
import functools
import json
import marshal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.cases.errors import EvalFileError

if TYPE_CHECKING:
    import yaml

    from pytest_agent_eval.cases.cache import ParseCache  # imports hashlib (OpenSSL): only with a cache


@functools.cache
def _pyyaml() -> ModuleType:
    """PyYAML, imported with the first YAML file (a JSON-only run never pays for it) and cached here.

    Kept, not looked up again: pytester's in-process runs drop the modules a run imported from ``sys.modules``,
    and a re-imported PyYAML's C loader constructs nothing ("could not determine a constructor for the tag None").
    """
    import yaml

    return yaml


PathKey = tuple[str | int, ...]
YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
# YAML positions are tracked this deep (root = 0). JSON tracks down to the cases (depth 2) and decodes each case
# with the C decoder; positions inside a case are found only when a message needs them.
_YAML_DEPTH = 5
_JSON_DEPTH = 2
# Cached YAML documents decode lines this deep at once (a case's own line), the rest on demand.
_SHALLOW = 2


@dataclass
class Document:
    """A parsed file: its data and the 1-based line of each path into it."""

    path: Path
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)
    locate: Callable[[PathKey], None] | None = field(default=None, repr=False)
    """Fills ``lines`` below a key on demand (JSON decodes cases wholesale and locates their keys lazily)."""

    def line(self, key: PathKey) -> int:
        """The line of ``key``, or of its nearest located ancestor."""
        if key not in self.lines and self.locate is not None:
            self.locate(key)
        while key:
            found = self.lines.get(key)
            if found is not None:
                return found
            key = key[:-1]
        return self.lines.get((), 1)


def read_document(path: Path, text: str | None = None, cache: ParseCache | None = None) -> Document:
    """Parse ``path`` (YAML or JSON by suffix); raise :class:`EvalFileError` on syntax errors.

    YAML documents are read from / stored in ``cache`` when one is given.
    """
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalFileError(path, None, f"cannot read file: {exc}") from exc
    if path.suffix.lower() in JSON_SUFFIXES:
        return _read_json(path, text)
    cached = cache.get(text) if cache is not None else None
    if cached is not None and len(cached) == 3:
        return _cached_document(path, *cached)
    doc = _read_yaml(path, text)
    if cache is not None:
        shallow = {k: v for k, v in doc.lines.items() if len(k) <= _SHALLOW}
        deep = {k: v for k, v in doc.lines.items() if len(k) > _SHALLOW}
        with contextlib.suppress(ValueError):  # e.g. YAML timestamps: marshal cannot hold them, the cache skips them
            cache.put(text, (doc.data, shallow, marshal.dumps(deep)))
    return doc


def _cached_document(path: Path, data: Any, shallow: dict[PathKey, int], deep: bytes) -> Document:
    """A document from the parse cache: lines below the cases are decoded only when a message needs them."""
    pending = [deep]

    def locate(key: PathKey) -> None:  # holds `lines`, not the document: no cycle, the document is freed at once
        if len(key) > _SHALLOW and pending:
            shallow.update(marshal.loads(pending.pop()))

    return Document(path, data, shallow, locate)


def _read_yaml(path: Path, text: str) -> Document:
    yaml = _pyyaml()
    # the C loader is several times faster; fall back where libyaml is missing
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise EvalFileError(path, line, f"YAML syntax error: {problem}; fix the YAML syntax") from exc
    except yaml.YAMLError as exc:
        raise EvalFileError(path, None, f"YAML error: {exc}") from exc
    finally:
        loader.dispose()
    doc = Document(path, data)
    if node is not None:
        _yaml_lines(node, (), doc.lines, 0, yaml)
    return doc


def _yaml_lines(node: yaml.Node, key: PathKey, out: dict[PathKey, int], depth: int, yaml: ModuleType) -> None:
    out[key] = node.start_mark.line + 1
    if depth >= _YAML_DEPTH:
        return
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode):
                child = (*key, str(k.value))
                _yaml_lines(v, child, out, depth + 1, yaml)
                out[child] = k.start_mark.line + 1  # the key's line reads best in messages
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _yaml_lines(v, (*key, i), out, depth + 1, yaml)


def _read_json(path: Path, text: str) -> Document:
    reader = _JsonReader(text, _JSON_DEPTH)
    try:
        data = reader.value(reader.skip(0), (), 0)
        end = reader.skip(reader.pos)
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    except json.JSONDecodeError as exc:
        raise EvalFileError(
            path, exc.lineno, f"JSON syntax error: {exc.msg} (column {exc.colno}); fix the JSON syntax"
        ) from exc
    except RecursionError as exc:
        raise EvalFileError(path, None, "JSON nested too deeply") from exc
    lines = _lines_at(text, reader.offsets)
    shallow = reader.offsets
    located: set[PathKey] = set()

    def locate(key: PathKey) -> None:  # holds `lines`, not the document: no cycle, the document is freed at once
        prefix = key[:_JSON_DEPTH]
        if len(prefix) == _JSON_DEPTH and prefix in shallow and prefix not in located:
            located.add(prefix)
            deep = _JsonReader(text, 64)
            deep.value(shallow[prefix], prefix, _JSON_DEPTH)
            new = {k: off for k, off in deep.offsets.items() if k not in lines}
            lines.update(_lines_at(text, new))

    return Document(path, data, lines, locate)


def _lines_at(text: str, offsets: dict[PathKey, int]) -> dict[PathKey, int]:
    """The 1-based line of each offset: newlines counted once, from one offset to the next."""
    lines: dict[PathKey, int] = {}
    line, pos = 1, 0
    for key, offset in sorted(offsets.items(), key=lambda pair: pair[1]):
        line += text.count("\n", pos, offset)
        pos = offset
        lines[key] = line
    return lines


class _JsonReader:
    """A JSON reader that records the offset of shallow keys; deep values use the C decoder."""

    _WS = " \t\n\r"

    def __init__(self, text: str, max_depth: int):
        self.text = text
        self.max_depth = max_depth
        self.pos = 0
        self.offsets: dict[PathKey, int] = {}
        self._decoder = json.JSONDecoder()

    def skip(self, i: int) -> int:
        text, ws = self.text, self._WS
        while i < len(text) and text[i] in ws:
            i += 1
        return i

    def value(self, i: int, key: PathKey, depth: int) -> Any:
        self.offsets[key] = i
        text = self.text
        if depth < self.max_depth and i < len(text) and text[i] in "{[":
            return self._object(i, key, depth) if text[i] == "{" else self._array(i, key, depth)
        val, self.pos = self._decoder.raw_decode(text, i)
        return val

    def _object(self, i: int, key: PathKey, depth: int) -> dict[str, Any]:
        text, out = self.text, dict[str, Any]()
        i = self.skip(i + 1)
        if i < len(text) and text[i] == "}":
            self.pos = i + 1
            return out
        while True:
            if i >= len(text) or text[i] != '"':
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
            name, j = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            j = self.skip(j)
            if j >= len(text) or text[j] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, j)
            child = (*key, name)
            out[name] = self.value(self.skip(j + 1), child, depth + 1)
            self.offsets[child] = i
            i = self.skip(self.pos)
            if i < len(text) and text[i] == ",":
                i = self.skip(i + 1)
                continue
            if i < len(text) and text[i] == "}":
                self.pos = i + 1
                return out
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)

    def _array(self, i: int, key: PathKey, depth: int) -> list[Any]:
        text, out = self.text, list[Any]()
        i = self.skip(i + 1)
        if i < len(text) and text[i] == "]":
            self.pos = i + 1
            return out
        while True:
            out.append(self.value(i, (*key, len(out)), depth + 1))
            i = self.skip(self.pos)
            if i < len(text) and text[i] == ",":
                i = self.skip(i + 1)
                continue
            if i < len(text) and text[i] == "]":
                self.pos = i + 1
                return out
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
