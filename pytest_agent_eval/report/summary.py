"""The "agent eval summary" terminal section: figures per file and tag, and the partial passes.

Figures per file and per tag, and the cases that passed only partially. A plugin object on the
controller, built from the records, so it reads the same under ``-n``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.text import text_table

# The record and the figures load with the first summary written: a run without eval files pays
# nothing for them.
if (
    TYPE_CHECKING
):  # the table is also the HTML page's, which the command-line tool writes without pytest
    import pytest

    from pytest_agent_eval.report.collector import Records
    from pytest_agent_eval.report.record import CaseRecord
    from pytest_agent_eval.report.stats import Stats

TITLE = "agent eval summary"
_NOT_RUN_SHOWN = 3
_HEADER = (
    "",
    "passed",
    "score mean",
    "score min",
    "repeat pass",
    "latency p50",
    "latency p95",
    "tool acc",
)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _row(name: str, stats: Stats, usage: bool) -> tuple[str, ...]:
    row: tuple[str, ...] = (
        name,
        f"{stats.passed}/{stats.total}",
        _num(stats.mean_score, ".2f"),
        _num(stats.min_score, ".2f"),
        _percent(stats.repeated_pass_rate),
        _num(stats.latency_p50, ".2f") + ("" if stats.latency_p50 is None else " s"),
        _num(stats.latency_p95, ".2f") + ("" if stats.latency_p95 is None else " s"),
        _percent(stats.tool_accuracy),
    )
    if usage:
        cost = _num(stats.cost, ".4f")
        if stats.unpriced_cases:  # a model had no price: the sum leaves its cases out
            cost = "unpriced" if stats.cost is None else f"{cost} (partial)"
        row += (_num(stats.tokens, ","), cost)
    return row


def summary_rows(records: list[CaseRecord]) -> list[tuple[str, ...]]:
    """The table's rows: the header, then all cases, each file, each tag, each matrix agent.

    Also the markdown summary's table.
    """
    from pytest_agent_eval.report.stats import Stats, by_agent, by_file_and_tag

    usage = any(r.tokens is not None or r.cost is not None for r in records)
    header = _HEADER + (("tokens", "cost") if usage else ())
    by_file, by_tag = by_file_and_tag(records)
    rows = [header, _row("all", Stats.of(records), usage)]
    rows += [_row(name, Stats.of(group), usage) for name, group in sorted(by_file.items())]
    rows += [_row(f"tag {name}", Stats.of(group), usage) for name, group in sorted(by_tag.items())]
    rows += [
        _row(f"agent {name}", Stats.of(group), usage) for name, group in by_agent(records).items()
    ]
    return rows


def summary_lines(records: list[CaseRecord]) -> list[str]:
    """The section's lines: a table, then the partial passes.

    The table has the total, each file, each tag, each matrix agent.
    """
    from pytest_agent_eval.report.stats import partial_passes

    lines = text_table(summary_rows(records))
    lines += pass_k_notes(records)
    lines += adaptive_notes(records)
    lines += cache_notes(records)
    lines += cost_notes(records)
    partial = partial_passes(records)
    if partial:
        lines.append("")
        lines.append(f"passed partially ({len(partial)}):")
        for record, what in partial:
            lines.append(f"  {record.nodeid} (score {_num(record.score, '.2f')})")
            lines += [f"    {line}" for line in what]
    from pytest_agent_eval.report.trust import (
        tables,
        text_lines,
    )  # injection variants, judges (SPEC §26)

    lines += text_lines(tables(records))
    return lines


def pass_k_notes(records: list[CaseRecord]) -> list[str]:
    """The line with the repeated cases' mean pass@k and pass^k; none without repeated cases."""
    from pytest_agent_eval.report.stats import Stats

    line = Stats.of(records).pass_k_line()
    return [] if line is None else [line]


def adaptive_notes(records: list[CaseRecord]) -> list[str]:
    """The line of what stopping once decided saved; none without an adaptive case.

    ``adaptive trials (2 cases): 11/20 trials used, 9 saved (45%)``; an adaptive case has
    ``repeat: {max, stop: decided}``.
    """
    adaptive = [r for r in records if r.trials_used is not None and r.trials_saved is not None]
    if not adaptive:
        return []
    used = sum(r.trials_used or 0 for r in adaptive)
    saved = sum(r.trials_saved or 0 for r in adaptive)
    cases = f"{len(adaptive)} case{'s' if len(adaptive) != 1 else ''}"
    share = f" ({100 * saved / (used + saved):.0f}%)" if used + saved else ""
    return [f"adaptive trials ({cases}): {used}/{used + saved} trials used, {saved} saved{share}"]


def cache_notes(records: list[CaseRecord]) -> list[str]:
    """The line of the cases reported from the verdict cache; none when no record came from it.

    ``verdict cache: 3 of 5 cases reported from it (not run again)``.
    """
    cached = sum(r.cached for r in records)
    if not cached:
        return []
    return [f"verdict cache: {cached} of {len(records)} cases reported from it (not run again)"]


def cost_notes(records: list[CaseRecord]) -> list[str]:
    """The line saying the run's cost is partial (or unknown) and which models had no price.

    None when the cost is whole.
    """
    from pytest_agent_eval.report.stats import Stats

    line = Stats.of(records).cost_line()
    return [] if line is None else [line]


def not_run_parts(
    entries: list[dict[str, Any]],
    collected: int,
    shown: int,
    code: Callable[[str], str] = str,
    text: Callable[[str], str] = str,
) -> tuple[str, str]:
    """The cases not run (the JSON report's ``not_run``), counted and the first ``shown`` named.

    As ``("N of M eval cases", "id (why), … and K more")`` (``code`` formats a node id, ``text`` a
    reason).
    """
    count = (
        f"{len(entries)} of {collected} eval cases" if collected else f"{len(entries)} eval cases"
    )
    named = ", ".join(
        f"{code(entry['nodeid'])} ({text(entry['reason'])})" for entry in entries[:shown]
    )
    more = len(entries) - shown
    return count, named + (f" and {more} more" if more > 0 else "")


def not_run_lines(entries: list[dict[str, Any]], collected: int) -> list[str]:
    """The terminal's line naming the cases that did not run or finish (the first few).

    None when every case did.
    """
    if not entries:
        return []
    count, named = not_run_parts(entries, collected, _NOT_RUN_SHOWN)
    return ["", f"not run: {count}: {named}"]


def one_line(records: list[CaseRecord]) -> str:
    """The section in one line, for ``-q -q``."""
    from pytest_agent_eval.report.stats import Stats, partial_passes

    stats = Stats.of(records)
    parts = [f"agent eval: {stats.passed}/{stats.total} passed"]
    if stats.mean_score is not None:
        parts.append(f"mean score {stats.mean_score:.2f}")
    if stats.latency_p95 is not None:
        parts.append(f"latency p95 {stats.latency_p95:.2f} s")
    partial = len(partial_passes(records))
    if partial:
        parts.append(f"{partial} passed partially")
    parts += adaptive_notes(records) + cache_notes(records)
    cost = stats.cost_line()
    if cost is not None:
        parts.append(cost)
    return ", ".join(parts)


class Summary:
    """The summary's plugin object on the controller.

    It writes the section at the end of the run when eval items ran.
    """

    def __init__(self, collector: Records, verbosity: Callable[[], int]) -> None:
        self.collector = collector
        self.verbosity = verbosity

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        records = self.collector.records
        not_run = self.collector.not_run()
        if not records and not not_run:
            return
        if self.verbosity() <= -2:
            terminalreporter.write_line(
                one_line(records) + (f", {len(not_run)} not run" if not_run else "")
            )
            return
        terminalreporter.write_sep("=", TITLE)
        for line in (summary_lines(records) if records else []) + not_run_lines(
            not_run, self.collector.collected
        ):
            terminalreporter.write_line(line)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Name the cases not run after an internal error, when pytest writes no summary.

        For example xdist ending the run when a worker's machine is gone: pytest writes no summary,
        and the cases not run are named all the same.
        """
        import pytest

        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if exitstatus == pytest.ExitCode.INTERNAL_ERROR and reporter is not None:
            for line in not_run_lines(self.collector.not_run(), self.collector.collected):
                reporter.write_line(line, yellow=True, bold=True)
