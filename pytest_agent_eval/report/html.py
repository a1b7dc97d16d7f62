"""The HTML report: one self-contained HTML page of a run.

Written by ``--agent-eval-html PATH`` and by ``agent-eval html REPORT [BASE] -o PATH``.

The page is rendered from the JSON report's document (run metadata and the per-case records): the
summary, the charts and the baseline comparison are HTML written here (readable without JavaScript);
the case table, its filters and each case's details are drawn by an inline script from the records
embedded as JSON. Nothing is loaded from the network (a Content-Security-Policy forbids it). Every
string from the run is escaped: here with ``html.escape``, in the page by its ``esc``. No pytest
here: the command-line tool writes the same page.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.report.atomic import write_report, write_text_atomically
from pytest_agent_eval.report.baseline import Change, Comparison
from pytest_agent_eval.report.record import CaseRecord
from pytest_agent_eval.report.stats import Stats, by_file_and_tag, percentile
from pytest_agent_eval.report.summary import cost_notes, pass_k_notes, summary_rows

if TYPE_CHECKING:
    import pytest

    from pytest_agent_eval.report.collector import Records

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def embedded_json(data: Any) -> str:
    """``data`` as JSON that cannot end its ``<script>`` element or open a comment inside it."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
    ):
        text = text.replace(char, escaped)
    return text.replace("\u2029", "\\u2029")


def _table(rows: list[tuple[str, ...]], cls: str = "") -> str:
    head, body = rows[0], rows[1:]
    out = [
        f'<table class="{cls}"><thead><tr>',
        *(f"<th>{esc(h)}</th>" for h in head),
        "</tr></thead><tbody>",
    ]
    for row in body:
        out.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _trust_section(records: list[CaseRecord], document: dict[str, Any]) -> str:
    """The trust figures of SPEC §26, as a section of the page.

    Attack success rates of injection variants, judges' calibration and panels' agreement.
    """
    from pytest_agent_eval.report.trust import figures, tables

    found = {
        k: document[k]
        for k in ("injection", "judges", "panels")
        if isinstance(document.get(k), dict)
    }
    shown = tables(records, found or figures(records))
    if not shown:
        return ""
    body = "".join(f"<h3>{esc(t.title)}</h3>{_table([t.header, *t.rows], 'trust')}" for t in shown)
    return f'<section id="trust"><h2>Injection and judges</h2>{body}</section>'


def _counts(records: list[CaseRecord]) -> str:
    found = {o: sum(r.outcome == o for r in records) for o in _OUTCOMES}
    parts = [f'<span class="o-{o}">{n} {o}</span>' for o, n in found.items() if n]
    return f'<p class="counts" id="counts">{len(records)} cases: {", ".join(parts) or "none"}</p>'


def _histogram(records: list[CaseRecord]) -> str:
    """The score distribution as an SVG bar chart, ten bins from 0 to 1."""
    scores = [r.score for r in records if r.score is not None]
    bins = [0] * 10
    for score in scores:
        bins[min(int(score * 10), 9)] += 1
    top = max(bins) or 1
    bars = []
    for i, n in enumerate(bins):
        h = 100 * n / top
        bars.append(
            f'<rect x="{i * 30 + 2}" y="{110 - h:.1f}" width="26" height="{h:.1f}">'
            f"<title>{i / 10:.1f}–"
            f"{(i + 1) / 10:.1f}: {n} cases</title></rect>"
            f'<text x="{i * 30 + 15}" y="125" text-anchor="middle">{i / 10:.1f}</text>'
        )
    return (
        f"<figure><figcaption>Scores ({len(scores)} scored cases)</figcaption>"
        f'<svg class="chart" viewBox="0 0 300 130" width="300" height="130" role="img">'
        f"{''.join(bars)}</svg></figure>"
    )


def _latency_chart(title: str, groups: dict[str, list[CaseRecord]]) -> str:
    """Latency p50 and p95 per group as horizontal SVG bars."""
    rows = []
    for name, group in sorted(groups.items()):
        latencies = [t.latency_s for r in group for t in r.trials]
        if latencies:
            rows.append((name, percentile(latencies, 0.5), percentile(latencies, 0.95)))
    if not rows:
        return ""
    top = max(p95 for _, _, p95 in rows) or 1.0
    parts = []
    for i, (name, p50, p95) in enumerate(rows[:40]):
        y = i * 22
        parts.append(
            f'<text x="0" y="{y + 14}">{esc(name if len(name) <= 38 else "…" + name[-37:])}</text>'
            f'<rect class="p95" x="250" y="{y + 2}" width="{300 * p95 / top:.1f}" height="16">'
            f"<title>p95 {_seconds(p95)}</title></rect>"
            f'<rect class="p50" x="250" y="{y + 6}" width="{300 * p50 / top:.1f}" height="8">'
            f"<title>p50 {_seconds(p50)}</title></rect>"
            f'<text x="{255 + 300 * p95 / top:.1f}" y="{y + 14}">'
            f"{_seconds(p50)} / {_seconds(p95)}</text>"
        )
    height = 22 * min(len(rows), 40)
    return (
        f"<figure><figcaption>Latency p50 / p95 {esc(title)}</figcaption>"
        f'<svg class="chart" viewBox="0 0 700 {height}" width="700" height="{height}" role="img">'
        f"{''.join(parts)}</svg></figure>"
    )


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _charts(records: list[CaseRecord]) -> str:
    by_file, by_tag = by_file_and_tag(records)
    return (
        '<section id="charts"><h2>Charts</h2><div class="charts">'
        + _histogram(records)
        + _latency_chart("per file", by_file)
        + _latency_chart("per tag", by_tag)
        + "</div></section>"
    )


def _side(record: CaseRecord | None, unknown: bool = False) -> str:
    """One side of a changed case: outcome, score, pass count, the failed checks and the output.

    ``unknown``: the records of that side are not at hand.
    """
    if unknown:
        return "<td>not in this report (give the baseline's report to see it)</td>"
    if record is None:
        return "<td>—</td>"
    failed = [c for c in record.checks if not c.passed]
    lines = [
        f'<b class="o-{esc(record.outcome)}">{esc(record.outcome)}</b>',
        f"score {record.score:.2f}" if record.score is not None else "not scored",
    ]
    if len(record.trials) > 1:
        lines.append(f"{record.passes}/{len(record.trials)} trials passed")
    lines += [f"✗ {esc(c.name)}: {esc(c.message)}" for c in failed[:5]]
    if record.error:
        lines.append(f"error: {esc(record.error[:300])}")
    if record.output:
        lines.append(f"<pre>{esc(record.output[:600])}</pre>")
    return "<td>" + "<br>".join(lines) + "</td>"


@dataclass(frozen=True)
class Baseline:
    """The run's comparison with an earlier report, that report's records and its name.

    The comparison is made once, with the run's tolerance and significance; the earlier report's
    records are shown side by side.
    """

    comparison: Comparison
    records: list[CaseRecord] | None
    """``None``: not at hand (the comparison a report kept, shown without the baseline's side)."""
    name: str


def _baseline_section(records: list[CaseRecord], baseline: Baseline) -> str:
    comparison = baseline.comparison
    before = {r.nodeid: r for r in baseline.records or []}
    after = {r.nodeid: r for r in records}
    out = [
        '<section id="baseline"><h2>Compared with the baseline</h2>',
        f"<p>{esc(baseline.name)}: <b>{esc(comparison.counts())}</b></p>",
    ]
    out += [f'<p class="suite">{esc(line)}</p>' for line in comparison.suite_lines()]
    if comparison.matched:
        out.append(f"<p>{esc(comparison.matched)}</p>")
    for title, changes in comparison.groups():
        if not changes:
            continue
        out.append(f'<h3 id="baseline-{title}">{esc(title)} ({len(changes)})</h3>')
        out.append(
            '<table class="sbs"><thead><tr><th>case</th><th>change</th><th>baseline</th>'
            "<th>this run</th>"
        )
        out.append("</tr></thead><tbody>")
        change: Change
        for change in changes:
            was = _side(before.get(change.in_baseline), unknown=baseline.records is None)
            out.append(
                f"<tr><td><code>{esc(change.nodeid)}</code></td><td>{esc(change.detail)}</td>"
                f"{was}{_side(after.get(change.nodeid))}</tr>"
            )
        out.append("</tbody></table>")
    out.append("</section>")
    return "".join(out)


def _run_header(run: dict[str, Any]) -> str:
    facts = [
        ("started", run.get("started")),
        ("duration", f"{run.get('duration_s', 0):.1f} s"),
        ("pytest", run.get("pytest_version")),
        ("python", run.get("python_version")),
        ("plugin", run.get("plugin_version")),
        ("git commit", (run.get("git_commit") or "")[:12] or None),
        ("LLM", run.get("llm_model")),
        ("arguments", " ".join(run.get("args") or [])),
    ]
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts if v)
    shard = run.get("shard")
    if isinstance(shard, dict):  # --agent-eval-shard
        facts.insert(
            2,
            (
                "shard",
                f"{shard.get('index')}/{shard.get('count')} of {shard.get('collected')} items",
            ),
        )
    banner = ""
    incomplete = run.get("incomplete")
    if (
        isinstance(incomplete, list) and incomplete
    ):  # agent-eval merge: a shard missing, a shard that stopped
        banner = (
            '<p class="interrupted" id="interrupted">This report does not hold the whole run: '
            f"{esc('; '.join(map(str, incomplete)))}.</p>"
        )
    elif not run.get("finished", True):
        banner = (
            '<p class="interrupted" id="interrupted">This run was interrupted: '
            "the page shows the cases that finished.</p>"
        )
    return f'<dl class="run">{items}</dl>{banner}'


def _not_run_section(entries: list[dict[str, Any]]) -> str:
    """The section of the cases that did not run or finish, each with where it is and why.

    A case may not run or finish because of a dead worker or an interrupt.
    """
    if not entries:
        return ""
    rows = "".join(
        f"<tr><td><code>{esc(e.get('nodeid'))}</code></td>"
        f"<td>{esc(e.get('file'))}{'' if e.get('line') is None else ':' + esc(e.get('line'))}</td>"
        f"<td>{esc(e.get('reason'))}</td></tr>"
        for e in entries
    )
    return (
        f'<section id="not-run"><h2>Not run ({len(entries)})</h2>'
        "<p>These cases did not run or finish; the figures above leave them out "
        "(those a dead worker was running are counted as errors).</p>"
        "<table><thead><tr><th>case</th><th>where</th><th>why</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _flaky_section(flaky: dict[str, list[str]]) -> str:
    """The section of the flaky cases; nothing without any.

    A flaky case's outcome flips over the last stored runs while the case is unchanged.
    """
    if not flaky:
        return ""
    rows = "".join(
        f"<tr><td>{esc(nodeid)}</td><td>{esc(' '.join(outcomes))}</td></tr>"
        for nodeid, outcomes in sorted(flaky.items())
    )
    return (
        f'<section id="flaky"><h2>Flaky ({len(flaky)})</h2>'
        "<p>These cases both passed and failed over the last runs "
        "in the run store while their content stayed the same.</p>"
        "<table><thead><tr><th>case</th><th>outcomes, oldest first</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        "</section>"
    )


def render(document: dict[str, Any], baseline: Baseline | None = None) -> str:
    """The page for a JSON report's ``document``; with ``baseline``, the comparison first."""
    records = [CaseRecord.from_dict(c) for c in document.get("cases", [])]
    summary = _table(summary_rows(records), "summary") if records else "<p>No eval cases ran.</p>"
    summary += "".join(f'<p class="pass-k">{esc(line)}</p>' for line in pass_k_notes(records))
    summary += "".join(f'<p class="partial-cost">{esc(line)}</p>' for line in cost_notes(records))
    stats = Stats.of(records)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>agent eval report: {stats.passed}/{stats.total} passed</title>",
        f"<style>{_asset('report.css')}</style></head><body>",
        "<header><h1>agent eval report</h1>",
        _run_header(document.get("run") or {}),
        "</header>",
    ]
    if baseline is not None:  # what changed comes first
        parts.append(_baseline_section(records, baseline))
    parts.append(f'<section id="summary"><h2>Summary</h2>{_counts(records)}{summary}</section>')
    parts.append(_not_run_section(document.get("not_run") or []))
    parts.append(_flaky_section(document.get("flaky") or {}))
    parts.append(_trust_section(records, document))
    parts.append(_charts(records))
    parts += [
        '<section id="cases"><h2>Cases</h2>',
        "<noscript><p>The case table needs JavaScript; the summary above does not.</p></noscript>",
        '<div class="filters">',
        '<label>outcome <select id="f-outcome"><option value="">all</option>',
        *(f'<option value="{o}">{o}</option>' for o in _OUTCOMES),
        "</select></label>",
        '<label>file <select id="f-file"><option value="">all</option>',
        *(f'<option value="{esc(f)}">{esc(f)}</option>' for f in sorted({r.file for r in records})),
        "</select></label>",
        '<label>tag <select id="f-tag"><option value="">all</option>',
        *(
            f'<option value="{esc(t)}">{esc(t)}</option>'
            for t in sorted({t for r in records for t in r.tags})
        ),
        "</select></label>",
        '<label>text <input id="f-text" type="search" '
        'placeholder="case, output, message…"></label>',
        '<span id="shown"></span></div>',
        '<table id="case-table"><thead><tr>',
        '<th data-key="nodeid">case</th><th data-key="outcome">outcome</th>'
        '<th data-key="score">score</th>',
        '<th data-key="latency_s">latency</th><th data-key="cost">cost</th>'
        '<th data-key="tags">tags</th>',
        "</tr></thead><tbody></tbody></table></section>",
        f'<script type="application/json" id="data">{embedded_json(_linked(document))}</script>',
        f"<script>{_asset('report.js')}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _linked(document: dict[str, Any]) -> list[Any]:
    """The document's cases, each traced one with its trace's link (``run.trace_url``, SPEC §23)."""
    template = (document.get("run") or {}).get("trace_url")
    cases: list[Any] = document.get("cases", [])
    if not isinstance(template, str) or "{trace_id}" not in template:
        return cases
    return [
        {**c, "trace_url": template.replace("{trace_id}", c["trace_id"])}
        if isinstance(c, dict) and isinstance(c.get("trace_id"), str)
        else c
        for c in cases
    ]


def _asset(name: str) -> str:
    return resources.files("pytest_agent_eval.report").joinpath(name).read_text(encoding="utf-8")


def write_html(path: Path, document: dict[str, Any], baseline: Baseline | None = None) -> None:
    """Render the page and write it atomically."""
    write_text_atomically(path, render(document, baseline))


class HtmlReport:
    """A plugin object on the controller, registered when ``--agent-eval-html`` is given."""

    def __init__(self, config: pytest.Config, path: Path, collector: Records) -> None:
        from pytest_agent_eval.report.json_report import JsonReport

        self.config = config
        self.path = path
        self.source = JsonReport(
            config, path, collector
        )  # the same document as --agent-eval-report's
        self.written = False

    def baseline(self) -> Baseline | None:
        """``--agent-eval-baseline``'s comparison, when it was given and could be read.

        The same comparison the terminal shows.
        """
        compared = self.config.pluginmanager.get_plugin("agent_eval_baseline")
        comparison = None if compared is None else compared.compared()
        if compared is None or comparison is None:
            return None
        return Baseline(comparison, compared.baseline, str(compared.path))

    def write(self, exit_status: int | None, stopped: bool = False) -> None:
        self.written = True
        document, baseline = self.source.document(exit_status, stopped), self.baseline()
        path = self.path
        write_report(
            self.config,
            "agent eval html report",
            path,
            lambda: write_html(path, document, baseline),
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write(exitstatus, stopped=bool(session.shouldfail or session.shouldstop))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_sep("-", f"agent eval html report: {self.path}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if (
            not self.written
        ):  # the session ended before pytest_sessionfinish (Ctrl-C before it, a crash)
            self.write(None)
