"""``agent-eval merge`` (SPEC §18): the reports of a run's shards joined into one report.

``agent-eval merge A.json B.json … -o ALL.json`` joins the reports of a run's shards (or of any runs
over different cases) into one report. Plain Python, no pytest.

* A case in two reports is refused (:class:`MergeError`, naming both files and the node id): one of
  them would be dropped without a word.
* Shards of different splits (``1/2`` beside ``2/3``) or cut from different item totals (other
  files, another ``-k``) are refused: they were not one run.
* A shard that is missing, a report of a run that did not finish: the merged report is written, but
  says it is incomplete (``run.finished: false``, ``run.incomplete`` with a line each,
  ``run.missing_shards``, ``run.missing_items``) and ``agent-eval gate`` fails on it. Which eval
  cases a missing shard held is not known: only how many items (collected minus the given shards'
  selected, plain tests included).

The merged run: ``started`` is the earliest start, ``duration_s`` the sum of the reports' durations
(the machine time spent, not the wall time), ``exit_status`` the highest one (``null`` when one is
not known), a version, commit or model the one all reports share (else the versions joined, or
``null``). Each report's ``not_run`` list is joined. A report's baseline comparison is left out: it
covered that report's cases only (compare the merged report with ``agent-eval gate --baseline`` or
``agent-eval compare``); a matrix run's per-agent figures are computed anew.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pytest_agent_eval.report.atomic import write_text_atomically
from pytest_agent_eval.report.baseline import BaselineError, load_report, records_of
from pytest_agent_eval.report.jsonable import finite
from pytest_agent_eval.report.schema import SCHEMA_VERSION, report_text
from pytest_agent_eval.text import one_line


class MergeError(Exception):
    """Reports that cannot be merged; the message names the files and what is wrong."""


@dataclass(frozen=True)
class Part:
    """One report given to ``merge``."""

    path: Path
    document: dict[str, Any]

    @property
    def run(self) -> dict[str, Any]:
        return run_of(self.path, self.document)

    @property
    def shard(self) -> dict[str, Any] | None:
        shard = self.run.get("shard")
        if shard is None:
            return None
        if not (
            isinstance(shard, dict)
            and all(type(shard.get(k)) is int and shard[k] >= 1 for k in ("index", "count"))
            and all(
                shard.get(k) is None or type(shard.get(k)) is int for k in ("collected", "selected")
            )
        ):
            raise BaselineError(
                f"{self.path}: run.shard does not match the report schema "
                "(index, count, collected, selected)"
            )
        return shard


def run_of(path: Path, document: dict[str, Any]) -> dict[str, Any]:
    """A report's ``run`` (``{}`` when it has none); ``BaselineError`` when it is not an object."""
    run = document.get("run", {})
    if not isinstance(run, dict):
        raise BaselineError(f"{path}: run does not match the report schema: not an object")
    return run


def not_run_of(path: Path, document: dict[str, Any]) -> list[dict[str, Any]]:
    """A report's ``not_run`` list: the cases without a final record.

    ``BaselineError`` when it is malformed.
    """
    entries = document.get("not_run") or []
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("nodeid"), str) for e in entries
    ):
        raise BaselineError(
            f"{path}: not_run does not match the report schema: "
            "a list of {nodeid, file, line, reason}"
        )
    return entries


def merge(paths: list[Path]) -> dict[str, Any]:
    """The merged report of ``paths``.

    ``BaselineError`` for a file that is not a report, ``MergeError`` for reports that cannot be
    one.
    """
    parts = [Part(path, load_report(path)) for path in paths]
    _same_split(parts)
    owner: dict[str, Path] = {}
    cases: list[dict[str, Any]] = []
    not_run: dict[str, dict[str, Any]] = {}
    for part in parts:
        for case in part.document["cases"]:
            other = owner.get(case["nodeid"])
            if other is not None:
                raise MergeError(
                    f"{case['nodeid']} is in both {other} and {part.path}: "
                    "a case must be in one report only "
                    "(the same shard given twice, or a report merged again?)"
                )
            owner[case["nodeid"]] = part.path
            cases.append(case)
        not_run.update((entry["nodeid"], entry) for entry in not_run_of(part.path, part.document))
    cases.sort(key=lambda case: case["nodeid"])
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "run": _run(parts)}
    agents = _agents(cases)
    if agents:
        document["agents"] = agents
    from pytest_agent_eval.report.trust import (
        figures,
    )  # injection variants, judges (SPEC §26): of every shard

    document.update(figures(records_of(cases)))
    document["cases"] = cases
    if not_run:
        document["not_run"] = [not_run[nodeid] for nodeid in sorted(not_run)]
    return document


def _same_split(parts: list[Part]) -> None:
    """Refuse shards of different splits, or cut from different item totals."""
    shards = [(part, part.shard) for part in parts]
    split = {(s["count"], s["collected"]) for _, s in shards if s is not None}
    if len({count for count, _ in split}) > 1 or len({c for _, c in split if c is not None}) > 1:
        listed = ", ".join(
            f"{part.path} is shard {s['index']}/{s['count']} of {s['collected']} items"
            for part, s in shards
            if s
        )
        raise MergeError(
            f"the shards are not of one run: {listed}. Merge the shards of one split "
            "(the same N, the same files and -k/-m in every job)"
        )


def _problems(parts: list[Part]) -> tuple[list[str], list[int], int | None]:
    """Whether the merged report is complete, from its shards.

    ``(why the merged report is incomplete, the missing shards' indexes, the items they held)``.
    """
    problems = [
        f"{part.path}: the run did not finish"
        for part in parts
        if part.run.get("finished") is not True
    ]
    shards = [(part, s) for part in parts if (s := part.shard) is not None]
    if not shards:
        return problems, [], None
    problems += [
        f"{part.path} has no run.shard: it is not a shard's report"
        for part in parts
        if part.shard is None
    ]
    count, collected = shards[0][1]["count"], shards[0][1]["collected"]
    given: dict[int, Part] = {}
    for part, shard in shards:
        if shard["index"] in given:
            problems.append(
                f"shard {shard['index']}/{count} is given twice: "
                f"{given[shard['index']].path}, {part.path}"
            )
        given.setdefault(shard["index"], part)
    missing = [i for i in range(1, count + 1) if i not in given]
    problems += [f"shard {i}/{count} is missing" for i in missing]
    selected = [part.shard["selected"] for part in given.values() if part.shard is not None]
    items = None
    if collected is not None and all(isinstance(n, int) for n in selected):
        items = collected - sum(selected)
    if missing:
        held = f"{items} items" if items is not None else "an unknown number of items"
        problems.append(
            f"the missing shards held {held} (which eval cases among them is not known)"
        )
    return problems, missing, items


def _run(parts: list[Part]) -> dict[str, Any]:
    runs = [part.run for part in parts]
    problems, missing, items = _problems(parts)
    started = [r["started"] for r in runs if isinstance(r.get("started"), str)]
    durations = [r.get("duration_s") for r in runs]
    statuses = [r.get("exit_status") for r in runs]
    known = [s for s in statuses if type(s) is int]
    run: dict[str, Any] = {
        "started": min(started) if started else "",
        "duration_s": round(sum(max(d, 0.0) for d in map(finite, durations) if d is not None), 3),
        "finished": not problems,
        "exit_status": max(known) if known and len(known) == len(statuses) else None,
        "plugin_version": _joined(runs, "plugin_version"),
        "pytest_version": _joined(runs, "pytest_version"),
        "python_version": _joined(runs, "python_version"),
        "git_commit": _shared(runs, "git_commit"),
        "args": ["agent-eval", "merge", *(str(part.path) for part in parts)],
        "llm_model": _shared(runs, "llm_model"),
        "merged_from": [
            {
                "file": str(part.path),
                "cases": len(part.document["cases"]),
                "finished": part.run.get("finished") is True,
                "shard": part.shard,
            }
            for part in parts
        ],
    }
    if missing or problems:
        run.update(missing_shards=missing, missing_items=items, incomplete=problems)
    return run


def _joined(runs: list[dict[str, Any]], key: str) -> str:
    values = sorted({r[key] for r in runs if isinstance(r.get(key), str)})
    return ", ".join(values)


def _shared(runs: list[dict[str, Any]], key: str) -> str | None:
    values = {r.get(key) for r in runs}
    value = values.pop() if len(values) == 1 else None
    return value if isinstance(value, str) else None


def _agents(cases: list[dict[str, Any]]) -> dict[str, Any]:
    from pytest_agent_eval.report.stats import agent_figures

    return agent_figures(records_of(cases))


def merge_command(paths: list[str], output: str, out: TextIO, err: TextIO) -> int:
    """The ``agent-eval merge`` command: write the merged report to ``output``.

    0 when written (saying on ``err`` why it is incomplete, if it is), 2 when the reports cannot be
    merged or the file cannot be written.
    """
    try:
        document = merge([Path(p) for p in paths])
    except (BaselineError, MergeError) as exc:
        print(one_line(f"agent-eval merge: {exc}"), file=err)
        return 2
    try:
        write_text_atomically(Path(output), report_text(document))
    except OSError as exc:
        print(f"agent-eval merge: {output} not written: {exc.strerror or exc}", file=err)
        return 2
    for line in document["run"].get("incomplete", []):
        print(one_line(f"agent-eval merge: incomplete: {line}"), file=err)
    print(
        f"agent-eval merge: wrote {output} "
        f"({len(document['cases'])} cases from {len(paths)} reports)",
        file=out,
    )
    return 0
