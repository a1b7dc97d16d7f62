"""Per-case cassettes: the HTTP requests a case made and the answers it got.

In vcrpy's YAML format (version 1).

``interactions`` holds ``{request: {method, uri, body, headers}, response: {status: {code, message},
headers, body: {string}}}`` in the order the trials made them (each also names its ``trial``), so
vcrpy's tooling reads them. Secrets are never written: only the ``content-type`` header is kept, URL
userinfo, ``api_key``-like query parameters and JSON fields, and every secret value the run knows
are replaced (``pytest_agent_eval.secrets``). A request matches a recorded one on method, URL and
body (JSON compared as data, the fields named in ``ignore`` left out at any depth).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agent_eval.secrets import SCRUBBED, scrub_data, scrub_text, scrub_url

__all__ = ["SCRUBBED", "scrub_url"]  # the traffic layer's names for them

_KEPT_HEADERS = ("content-type",)
_scrub_data = scrub_data


def _without(data: Any, ignore: frozenset[str]) -> Any:
    if isinstance(data, dict):
        return {k: _without(v, ignore) for k, v in data.items() if k not in ignore}
    if isinstance(data, list):
        return [_without(v, ignore) for v in data]
    return data


def body_text(body: bytes) -> str | bytes:
    """A body as text when it is UTF-8; JSON bodies scrubbed.

    Bytes otherwise: YAML writes them as ``!!binary``.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    data = _json(text)
    if data is not None:
        scrubbed = _scrub_data(data)
        if scrubbed != data:
            return json.dumps(scrubbed, ensure_ascii=False)
    return scrub_text(text)


def _json(text: str) -> Any:
    if text[:1] not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def match_key(
    method: str, url: str, body: str | bytes | None, ignore: frozenset[str]
) -> tuple[str, str, str]:
    """What two requests must share to match.

    Method, scrubbed URL, body (JSON as sorted data, without ``ignore``).
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body or ""
    data = _json(text)
    if data is not None:
        text = json.dumps(_without(_scrub_data(data), ignore), sort_keys=True, ensure_ascii=False)
    return method.upper(), scrub_url(url), text


@dataclass
class Interaction:
    """One request and the answer it got."""

    method: str
    uri: str
    request_body: str | bytes | None
    request_type: str | None
    status: int
    reason: str
    response_type: str | None
    response_body: str | bytes
    trial: int = 1

    def to_vcr(self) -> dict[str, Any]:
        return {
            "request": {
                "body": self.request_body,
                "headers": {"Content-Type": [self.request_type]} if self.request_type else {},
                "method": self.method,
                "uri": self.uri,
            },
            "response": {
                "status": {"code": self.status, "message": self.reason},
                "headers": {"Content-Type": [self.response_type]} if self.response_type else {},
                "body": {"string": self.response_body},
            },
            "trial": self.trial,
        }

    @classmethod
    def from_vcr(cls, data: dict[str, Any]) -> Interaction:
        """One recorded interaction.

        ``TypeError``/``KeyError``/``ValueError`` when it is not of the shape written.
        """
        request, response = data["request"], data["response"]
        request_body, response_body = (
            request.get("body"),
            response.get("body", {}).get("string", ""),
        )
        if not isinstance(request_body, (str, bytes, type(None))) or not isinstance(
            response_body, (str, bytes)
        ):
            raise TypeError("a request body is text, bytes or null, a response body text or bytes")
        return cls(
            method=str(request["method"]),
            uri=str(request["uri"]),
            request_body=request_body,
            request_type=_header(request.get("headers")),
            status=int(response["status"]["code"]),
            reason=str(response["status"].get("message", "")),
            response_type=_header(response.get("headers")),
            response_body=response_body,
            trial=int(data.get("trial", 1)),
        )

    @property
    def response_bytes(self) -> bytes:
        body = self.response_body
        return body if isinstance(body, bytes) else body.encode("utf-8")


def _header(headers: Any) -> str | None:
    for name, values in (headers or {}).items():
        if str(name).lower() in _KEPT_HEADERS and values not in ([], None):
            return str(values[0] if isinstance(values, list) else values)
    return None


class CassetteError(Exception):
    """A cassette file that cannot be read."""


class Cassette:
    """One case's recorded interactions.

    ``take`` hands out matches in order (a match again once all are used).
    """

    def __init__(
        self,
        path: Path,
        ignore: frozenset[str],
        load: bool = True,
        old: Path | None = None,
        folder: Path | None = None,
    ) -> None:
        self.path = path
        self.folder = folder
        """The cassette folder ``path`` is in (the one beside the eval file, or
        ``agent_eval_cassettes``).
        """
        self.ignore = ignore
        self.interactions: list[Interaction] = []
        self.new: list[Interaction] = []
        self._used: set[int] = set()
        self._lock = threading.Lock()
        source = (
            path if path.is_file() or old is None or not old.is_file() else old
        )  # a cassette of the old shape
        self.exists = load and source.is_file()
        if self.exists:
            self.interactions = _read(source)
        self._keys = [self.key(i) for i in self.interactions]

    def key(self, interaction: Interaction) -> tuple[str, str, str]:
        return match_key(interaction.method, interaction.uri, interaction.request_body, self.ignore)

    def take(self, key: tuple[str, str, str]) -> Interaction | None:
        """The first unused recorded answer to a request with ``key``.

        Else the first used one; else None.
        """
        with self._lock:
            found = [n for n, k in enumerate(self._keys) if k == key]
            fresh = [n for n in found if n not in self._used]
            if not found:
                return None
            n = fresh[0] if fresh else found[0]
            self._used.add(n)
            return self.interactions[n]

    def add(self, interaction: Interaction) -> None:
        with self._lock:
            self.new.append(interaction)

    def save(self, keep_old: bool, send: bool = False) -> tuple[str, str] | None:
        """Write the cassette (atomically): the new interactions in trial order.

        They come after the old ones if kept. With ``send`` (an xdist worker: its controller writes
        it) nothing is written here: ``(its path relative to its folder, its text)`` is returned
        instead. ``None``: nothing to write.
        """
        new = sorted(self.new, key=lambda i: i.trial)  # stable: each trial's requests stay in order
        interactions = (self.interactions if keep_old else []) + new
        if not new and (keep_old or not interactions):
            return None
        # with the first cassette written: the run's pace alone (no traffic option) never loads it
        import yaml

        text = yaml.dump(
            {"interactions": [i.to_vcr() for i in interactions], "version": 1},
            Dumper=getattr(
                yaml, "CSafeDumper", yaml.SafeDumper
            ),  # libyaml's, several times faster, where present
            sort_keys=False,
            allow_unicode=True,
            width=120,
        )
        if send:
            folder = self.folder if self.folder is not None else self.path.parent
            return self.path.relative_to(folder).as_posix(), text
        write_cassette(self.path, text)
        return None


def write_cassette(path: Path, text: str) -> None:
    """Write a cassette's text to ``path`` atomically.

    A temporary file is written beside it and renamed over it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sent_cassette_path(folder: Path, relative: str) -> Path | None:
    """Where a cassette a worker sent goes in ``folder`` on the controller.

    ``relative`` is its path in its cassette folder. ``None`` when ``relative`` would leave the
    folder (absolute, ``..``) or is not a ``.yaml`` file.
    """
    parts = relative.split("/")
    if (
        not relative.endswith(".yaml")
        or relative.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
    ):
        return None
    if any("\\" in p or ":" in p for p in parts):  # a Windows drive or separator
        return None
    return folder.joinpath(*parts)


def _read(path: Path) -> list[Interaction]:
    import yaml  # with the first cassette read

    try:
        data = yaml.load(
            path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
        return [Interaction.from_vcr(i) for i in (data or {}).get("interactions") or []]
    except (
        OSError,
        yaml.YAMLError,
        KeyError,
        IndexError,
        TypeError,
        ValueError,
        AttributeError,
        RecursionError,
    ) as exc:
        raise CassetteError(
            f"{path}: not a readable cassette ({type(exc).__name__}: {exc}); delete it and record "
            "again with --agent-eval-record"
        ) from None


def cassette_path(folder: Path, eval_file: Path, case_id: str, root: Path | None = None) -> Path:
    """The case's cassette, always inside ``folder``.

    ``<folder>/<eval file>/<case id>.yaml`` for the folder beside the eval file (``root`` None),
    ``<folder>/<eval file's folders below root>/<eval file>/<case id>.yaml`` for a folder shared by
    many eval files. ``<eval file>`` is its stem for a ``.yaml`` file, ``<stem>@<suffix>`` for
    another (``eval_x@json``). Each part is made safe as a name; one that had to change gets a hash
    of what it was (two files or case ids never share a cassette).
    """
    folders: list[str] = []
    if root is not None:
        try:
            folders = list(eval_file.parent.relative_to(root).parts)
        except (
            ValueError
        ):  # an eval file outside the rootdir: its whole path, under a folder of its own
            folders = ["_outside_rootdir", *eval_file.parent.parts[1:]]
    stem, suffix = _safe(eval_file.stem), eval_file.suffix
    name = stem if suffix == ".yaml" else f"{stem}@{_safe(suffix[1:])}"
    return folder.joinpath(*(_safe(p) for p in folders), name, _safe(case_id) + ".yaml")


def old_cassette_path(folder: Path, eval_file: Path, case_id: str) -> Path | None:
    """Where earlier versions wrote the case's cassette in the folder beside the eval file.

    That is ``<folder>/<eval file stem>/<case id>.yaml``, given when that is not where it is
    written now, that place was the file's alone (no other file of the same stem beside it) and it
    is inside ``folder``; else ``None``.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", case_id).strip(".") or "case"
    stem = eval_file.stem
    if stem != _safe(stem) or any(
        p != eval_file for p in eval_file.parent.glob(f"{glob.escape(stem)}.*")
    ):
        return None
    old = folder / stem / f"{name}.yaml"
    return None if old == cassette_path(folder, eval_file, case_id) else old


def _safe(name: str) -> str:
    """``name`` as a file name of letters, digits, ``.``, ``_`` and ``-``.

    Never hidden, ``.`` or ``..``.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".") or "_"
    return safe if safe == name else f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
