"""Read YAML and JSON files into plain data plus the line of every mapping key and list item."""

from __future__ import annotations

import contextlib
import functools
import json
import marshal
import re
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.core.files import JSON_SUFFIXES, JSONL_SUFFIXES
from pytest_agent_eval.core.jsonl import read_jsonl
from pytest_agent_eval.core.model import model

if TYPE_CHECKING:
    import yaml

    from pytest_agent_eval.core.parse_cache import (
        ParseCache,
    )  # imports hashlib (OpenSSL): only with a cache


@functools.cache
def _pyyaml() -> ModuleType:
    """PyYAML, imported with the first YAML file and cached here.

    A JSON-only run never pays for it. Kept, not looked up again: pytester's in-process runs drop
    the modules a run imported from ``sys.modules``, and a re-imported PyYAML's C loader constructs
    nothing ("could not determine a constructor for the tag None").
    """
    import yaml

    return yaml


PathKey = tuple[str | int, ...]
# YAML positions are tracked this deep (root = 0). JSON tracks down to the cases (depth 2) and
# decodes each case
# with the C decoder; positions inside a case are found only when a message needs them.
_YAML_DEPTH = 5
_JSON_DEPTH = 2
# Cached YAML documents decode lines this deep at once (a case's own line), the rest on demand.
_SHALLOW = 2
MAX_DEPTH = 50
"""How deep data may nest; deeper is an error.

What renders, copies or validates values recurses once per level.
"""
MAX_ALIASED = 100_000
"""How many values YAML aliases may add to a file's data.

A few hundred bytes of aliases can mean billions.
"""


@model
class Document:
    """A parsed file: its data and the 1-based line of each path into it."""

    path: Path
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)
    locate: Callable[[PathKey], None] | None = field(default=None, repr=False)
    """Fills ``lines`` below a key on demand.

    JSON decodes cases wholesale and locates their keys lazily.
    """
    bad_lines: list[EvalFileError] = field(default_factory=list)
    """JSON Lines that are not JSON, each one error case of the file.

    They stand beside the cases of the good lines.
    """

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


def read_document(
    path: Path, text: str | None = None, cache: ParseCache | None = None, core: bool = False
) -> Document:
    """Parse ``path`` (YAML, JSON or JSON Lines by suffix).

    Raise :class:`EvalFileError` on syntax errors. YAML documents are read from / stored in
    ``cache`` when one is given. ``core`` reads YAML with the YAML 1.2 core schema as js-yaml does
    (promptfoo's files: ``Yes``, ``on``, dates stay text; ``0755`` is 755), not PyYAML's YAML 1.1
    rules; such documents are not cached.
    """
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalFileError(path, 1, f"cannot read file: {exc}") from exc
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark (editors on Windows write one)
    suffix = path.suffix.lower()
    if suffix in JSON_SUFFIXES + JSONL_SUFFIXES:
        if suffix in JSON_SUFFIXES:
            doc = _read_json(path, text)
        else:
            data, lines, bad = read_jsonl(path, text)
            doc = Document(path, data, lines, bad_lines=bad)
        _check_shape(doc, None)
        return doc
    if core:
        cache = None
    cached = cache.get(text) if cache is not None else None
    if cached is not None and len(cached) == 3:
        return _cached_document(path, *cached)
    doc = _read_yaml(path, text, core)
    _check_shape(doc, text if "*" in text else None)  # no alias without a `*`
    if cache is not None:
        shallow = {k: v for k, v in doc.lines.items() if len(k) <= _SHALLOW}
        deep = {k: v for k, v in doc.lines.items() if len(k) > _SHALLOW}
        with contextlib.suppress(
            ValueError
        ):  # e.g. YAML timestamps: marshal cannot hold them, the cache skips them
            cache.put(text, (doc.data, shallow, marshal.dumps(deep)))
    return doc


def _cached_document(path: Path, data: Any, shallow: dict[PathKey, int], deep: bytes) -> Document:
    """A document from the parse cache.

    Lines below the cases are decoded only when a message needs them.
    """
    pending = [deep]

    def locate(
        key: PathKey,
    ) -> None:  # holds `lines`, not the document: no cycle, the document is freed at once
        if len(key) > _SHALLOW and pending:
            shallow.update(marshal.loads(pending.pop()))

    return Document(path, data, shallow, locate)


@functools.cache
def _strict_loader() -> type:
    """PyYAML's safe loader (the C one given libyaml) that notes duplicate and non-string keys."""
    yaml = _pyyaml()
    base = getattr(
        yaml, "CSafeLoader", yaml.SafeLoader
    )  # several times faster than the pure-Python one

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        problems: list[tuple[int, str]]

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: dict[str, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                    key_node, yaml.ScalarNode
                ):
                    # `<<` merges may be overridden; a list or mapping as key is PyYAML's own error
                    continue
                line = key_node.start_mark.line + 1
                if (
                    key_node.tag != "tag:yaml.org,2002:str"
                ):  # resolved as a number, a bool, null, a date...
                    key = self.construct_object(key_node)
                    self.problems.append(
                        (line, f'key {key!r} is not a string; quote it: "{key_node.value}"')
                    )
                elif (
                    key_node.value in seen
                ):  # a str-tagged scalar constructs to its value: no need to construct
                    first = seen[key_node.value]
                    self.problems.append(
                        (
                            line,
                            f"duplicate key {key_node.value!r} (first at line {first}); remove one",
                        )
                    )
                else:
                    seen[key_node.value] = line
            return super().construct_mapping(node, deep)  # type: ignore[no-any-return]

    return StrictLoader


@functools.cache
def _core_loader() -> type:
    """The strict loader with the YAML 1.2 core schema's plain scalars, as js-yaml reads them.

    Used for promptfoo's files. Only ``true``/``false`` (three spellings each) are booleans,
    ``~``/``null`` and empty are null, ints are decimal or ``0b``/``0o``/``0x`` (``0755`` is 755),
    ``_`` separators allowed; ``yes``, ``on``, dates and sexagesimals stay text. js-yaml would make
    a date a JavaScript ``Date``; here it keeps the text written.
    """

    class CoreLoader(_strict_loader()):  # type: ignore[misc]
        yaml_implicit_resolvers: ClassVar[
            dict[Any, Any]
        ] = {}  # none of YAML 1.1's: the core schema's only

        def construct_yaml_int(self, node: Any) -> int:
            value = str(self.construct_scalar(node)).replace("_", "")
            sign = -1 if value.startswith("-") else 1
            digits = value.lstrip("+-")
            bases = {"0b": 2, "0o": 8, "0x": 16}
            base = bases.get(digits[:2], 10)
            return sign * int(digits[2:] if base != 10 else digits, base)

    CoreLoader.add_constructor("tag:yaml.org,2002:int", CoreLoader.construct_yaml_int)
    resolvers = [
        ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
        ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        (
            "tag:yaml.org,2002:int",
            r"^[-+]?(?:0b[0-1_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*)$",
            "-+0123456789",
        ),
        (
            "tag:yaml.org,2002:float",
            r"^(?:[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            "-+0123456789.",
        ),
    ]
    for tag, pattern, first in resolvers:
        CoreLoader.add_implicit_resolver(tag, re.compile(pattern), list(first))
    return CoreLoader


def _read_yaml(path: Path, text: str, core: bool = False) -> Document:
    yaml = _pyyaml()
    loader = (_core_loader() if core else _strict_loader())(text)
    loader.problems = []
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in (
            exc.problem or ""
        ):  # libyaml's own limit (PyYAML >= 6.0.4), far past ours
            raise _too_deep(path, text) from exc
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise EvalFileError(
            path, line, f"YAML syntax error: {problem}; fix the YAML syntax"
        ) from exc
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        raise EvalFileError(path, line, f"YAML error: {exc.reason} ({char!r}); remove it") from exc
    except yaml.YAMLError as exc:
        raise EvalFileError(path, 1, f"YAML error: {exc}") from exc
    except RecursionError as exc:  # the pure-Python parser recurses per level
        raise _too_deep(path, text) from exc
    finally:
        loader.dispose()
    if loader.problems:
        raise EvalFileErrors(
            [EvalFileError(path, line, message) for line, message in sorted(loader.problems)]
        )
    doc = Document(path, data)
    if node is not None:
        _yaml_lines(node, (), doc.lines, 0, yaml)
    return doc


def _yaml_lines(
    node: yaml.Node, key: PathKey, out: dict[PathKey, int], depth: int, yaml: ModuleType
) -> None:
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
            path,
            exc.lineno,
            f"JSON syntax error: {exc.msg} (column {exc.colno}); fix the JSON syntax",
        ) from exc
    except RecursionError as exc:
        raise _too_deep(path, text) from exc
    if reader.duplicates:
        _duplicate_json_keys(path, text)
    lines = _lines_at(text, reader.offsets)
    shallow = reader.offsets
    located: set[PathKey] = set()

    def locate(
        key: PathKey,
    ) -> None:  # holds `lines`, not the document: no cycle, the document is freed at once
        prefix = key[:_JSON_DEPTH]
        if len(prefix) == _JSON_DEPTH and prefix in shallow and prefix not in located:
            located.add(prefix)
            deep = _JsonReader(text, MAX_DEPTH)
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
        self.duplicates: list[tuple[PathKey, int, int]] = []
        """``(key, offset of its first name, offset of the repeated one)`` for each repeated name.
        """
        self._decoder = json.JSONDecoder(object_pairs_hook=self._pairs)

    def _pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        """The C decoder's mappings, noting a repeated name.

        The repeated name's place is found when the file is reported.
        """
        out = dict(pairs)
        if len(out) != len(pairs):
            self.duplicates.append(((), 0, 0))
        return out

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
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", text, i
                )
            name, j = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            j = self.skip(j)
            if j >= len(text) or text[j] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", text, j)
            child = (*key, name)
            if name in out:
                self.duplicates.append((child, self.offsets[child], i))
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


def _duplicate_json_keys(path: Path, text: str) -> None:
    """Raise an error for each repeated name in a JSON object, naming the lines of both."""
    reader = _JsonReader(text, MAX_DEPTH)
    reader.value(reader.skip(0), (), 0)
    found = sorted({(first, again, key[-1]) for key, first, again in reader.duplicates if key})
    errors = []
    for first, again, name in found:
        first_line, line = text.count("\n", 0, first) + 1, text.count("\n", 0, again) + 1
        errors.append(
            EvalFileError(
                path, line, f"duplicate key {name!r} (first at line {first_line}); remove one"
            )
        )
    raise EvalFileErrors(
        errors or [EvalFileError(path, 1, "duplicate key in an object; remove one")]
    )


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _too_deep(path: Path, text: str) -> EvalFileError:
    """The error for data nested past :data:`MAX_DEPTH`, at the line where the nesting passes it."""
    depth, line = 0, 1
    for match in _BRACKETS.finditer(text):
        bracket = match.group()
        depth += 1 if bracket in "[{" else -1 if bracket in "]}" else 0
        if depth > MAX_DEPTH:
            line = text.count("\n", 0, match.start()) + 1
            break
    return EvalFileError(path, line, f"data nested deeper than {MAX_DEPTH} levels; flatten it")


def _check_shape(doc: Document, aliased: str | None) -> None:
    """Raise for data nested too deep, or whose aliases loop or expand too far.

    Data nested deeper than :data:`MAX_DEPTH` is refused; for a YAML text ``aliased`` (one that may
    use aliases), so are aliases that refer to themselves or expand past :data:`MAX_ALIASED` values.

    Without aliases the data is a tree: one pass, each value once. With them, a value may be shared:
    each container is measured once (its depth and expanded size), and the sizes are added up as the
    aliases would expand them.
    """
    if aliased is None:
        if _depth_exceeds(doc.data, MAX_DEPTH):
            _raise_too_deep(doc)
        return
    _check_aliased(doc, aliased)


def _depth_exceeds(data: Any, limit: int) -> bool:
    """Whether containers in ``data`` (a tree) nest deeper than ``limit``: a fast pass per level."""
    level = [data] if type(data) is dict or type(data) is list else []
    for _ in range(limit):
        below: list[Any] = []
        for c in level:
            below += [
                v
                for v in (c.values() if type(c) is dict else c)
                if type(v) is dict or type(v) is list
            ]
        if not below:
            return False
        level = below
    return True


def _raise_too_deep(doc: Document) -> None:
    """Raise the error for the first value of ``doc`` nested past :data:`MAX_DEPTH`, at its line."""
    stack: list[tuple[Any, PathKey]] = [(doc.data, ())]
    while stack:
        value, key = stack.pop()
        if len(key) > MAX_DEPTH:
            raise EvalFileError(
                doc.path,
                doc.line(key),
                f"{_where(key)}: nested deeper than {MAX_DEPTH} levels; flatten it",
            )
        items = (
            value.items()
            if type(value) is dict
            else enumerate(value)
            if type(value) is list
            else ()
        )
        stack.extend((v, (*key, k)) for k, v in items if type(v) is dict or type(v) is list)


def _check_aliased(doc: Document, text: str) -> None:
    sizes: dict[int, tuple[int, int]] = {}  # id -> (depth below, expanded size)
    unique = 0
    open_: set[int] = set()
    stack: list[tuple[Any, PathKey, bool]] = [(doc.data, (), False)]
    while stack:
        value, key, done = stack.pop()
        ident = id(value)
        children = list(value.items() if type(value) is dict else enumerate(value))
        if done:
            open_.discard(ident)
            depth, size = 0, 1
            for _, v in children:
                d, n = sizes.get(id(v), (0, 1)) if type(v) is dict or type(v) is list else (0, 1)
                depth, size = max(depth, d + 1), size + n
            if depth + len(key) > MAX_DEPTH:
                raise EvalFileError(
                    doc.path,
                    doc.line(key),
                    f"{_where(key)}: nested deeper than {MAX_DEPTH} levels (through aliases); "
                    "flatten it",
                )
            sizes[ident] = (depth, size)
            unique += 1 + sum(1 for _, v in children if type(v) is not dict and type(v) is not list)
            continue
        if ident in sizes:
            continue
        if len(key) > MAX_DEPTH:
            raise EvalFileError(
                doc.path,
                doc.line(key),
                f"{_where(key)}: nested deeper than {MAX_DEPTH} levels; flatten it",
            )
        open_.add(ident)
        stack.append((value, key, True))
        for k, v in children:
            if type(v) is dict or type(v) is list:
                if id(v) in open_:
                    raise EvalFileError(
                        doc.path,
                        doc.line(key),
                        f"{_where((*key, k))}: an alias refers to a value that contains it; "
                        "YAML data must not be recursive",
                    )
                if id(v) not in sizes:
                    stack.append((v, (*key, k), False))
    total = sizes[id(doc.data)][1] if id(doc.data) in sizes else 1
    if total - unique > MAX_ALIASED:
        first_alias = text.count("\n", 0, text.find("*")) + 1
        raise EvalFileError(
            doc.path,
            first_alias,
            f"aliases expand this file's data to {total:,} values "
            f"(more than {MAX_ALIASED:,} added by aliases); "
            "write the values out or use fewer aliases",
        )


def _where(key: PathKey) -> str:
    """``cases[0].metadata.x``: the first few parts of ``key`` (deep keys are long)."""
    out = ""
    for part in key[:5]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return (out or "(top level)") + ("..." if len(key) > 5 else "")


def pretty_path(key: PathKey) -> str:
    """``("cases", 2, "expect")`` -> ``cases[2].expect``, for messages."""
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"
