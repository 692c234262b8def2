"""How `tally whatif` and `tally definitions` print: old and new numbers side by side.

Terminal output is the CLI's concern: storage/queries/whatif.py computes the comparison, this
module only lays it out.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from storage.definitions import Version, changes
from storage.queries.channels import RulesComparison
from storage.queries.contract import GoalRow, SessionBreakdownRow
from storage.queries.whatif import METRICS, Comparison, GoalComparison, Side

LABELS = {
    "visitors": "visitors",
    "sessions": "visits",
    "bounce_rate": "bounce rate",
    "avg_session_duration_s": "visit duration (s)",
    "pageviews": "pageviews",
}


def number(metric: str, value: float) -> str:
    if metric == "bounce_rate":
        return f"{value * 100:.1f}%"
    if metric == "avg_session_duration_s":
        return f"{value:.1f}"
    return f"{int(value):,}"


def change(metric: str, old: float, new: float) -> str:
    if metric == "bounce_rate":
        return f"{(new - old) * 100:+.1f} pts"
    if not old:
        return "—" if not new else "new"
    return f"{(new - old) / old * 100:+.1f}%"


def heading(side: Side, role: str) -> str:
    gap_min = side.definitions["session_gap_s"] / 60
    bounce_s = side.definitions["engaged_bounce_ms"] / 1000
    return f"v{side.version} {role}\n(gap {gap_min:g} min, engaged {bounce_s:g} s)"


def print_comparison(comparison: Comparison, console: Console) -> None:
    """Totals with their change, then the top values of the breakdown (entry pages unless --by)."""
    current, proposed = comparison.current, comparison.proposed
    title = f"{comparison.site}: {comparison.start:%Y-%m-%d} to {comparison.end:%Y-%m-%d} (UTC, end excluded)"
    table = Table("", heading(current, "current"), heading(proposed, "proposed"), "change", title=title)
    for metric in METRICS:
        old, new = current.totals[metric], proposed.totals[metric]
        table.add_row(LABELS[metric], number(metric, old), number(metric, new), change(metric, old, new))
    console.print(table)
    by = comparison.by
    pages = Table(by, f"visits v{current.version}", f"visits v{proposed.version}", title=f"top {by} values")
    old_visits = {row.value: row.totals["sessions"] for row in current.rows}
    new_visits = {row.value: row.totals["sessions"] for row in proposed.rows}
    for page in dict.fromkeys([*new_visits, *old_visits]):
        pages.add_row(page, _visits(old_visits.get(page)), _visits(new_visits.get(page)))
    console.print(pages)


CHANNEL_METRICS = ("visitors", "sessions", "bounce_rate")


def print_channel_comparison(comparison: RulesComparison, console: Console) -> None:
    """Per channel, visitors, visits and bounce rate under the current and the proposed rules;
    then each source that changes channel, with its visits."""
    title = (
        f"{comparison.site} channels: {comparison.start:%Y-%m-%d} to {comparison.end:%Y-%m-%d} "
        f"(UTC, end excluded); rules {len(comparison.current_rules)} current, "
        f"{len(comparison.proposed_rules)} proposed"
    )
    columns = [f"{LABELS[m]} {side}" for m in CHANNEL_METRICS for side in ("current", "proposed")]
    table = Table("channel", *columns, title=title)
    current, proposed = _by_channel(comparison.current), _by_channel(comparison.proposed)
    for channel in dict.fromkeys([*current, *proposed]):
        cells = [
            _metric(metric, side.get(channel)) for metric in CHANNEL_METRICS for side in (current, proposed)
        ]
        table.add_row(channel, *cells)
    console.print(table)
    moves = Table("source", "from", "to", "visits", "visitors", title="sources that change channel")
    for move in comparison.moves:
        moves.add_row(move.source, move.current, move.proposed, f"{move.sessions:,}", f"{move.visitors:,}")
    if not comparison.moves:
        moves.add_row("(none)", "", "", "", "")
    console.print(moves)


def _by_channel(rows: list[SessionBreakdownRow]) -> dict[str, dict[str, float]]:
    return {row.value: row.totals for row in rows}


def _metric(metric: str, totals: dict[str, float] | None) -> str:
    return "—" if totals is None else number(metric, totals[metric])


def _visits(value: float | None) -> str:
    return "—" if value is None else f"{int(value):,}"


def version_lines(versions: list[Version], current: int) -> list[str]:
    """One tab-separated line per version (as `tally goals list`): a terminal's width never
    cuts one, and scripts can read them. The last field: what it changed from the version
    before it ("goals on example.com: +Signup; session gap 30m -> 20m")."""
    lines = []
    for before, version in zip([None, *versions], versions, strict=False):
        d = version.definitions
        marker = "current" if version.number == current else ""
        rules = " ".join(f"{name}={value}" for name, value in sorted(d.rule_fingerprints().items()))
        changed = "; ".join(changes(before.definitions, d)) if before else ""
        fields = [
            str(version.number), marker, f"session_gap_s={d.session_gap_s}",
            f"engaged_bounce_ms={d.engaged_bounce_ms}", f"watermark_s={d.watermark_s}", rules,
            f"{version.created_at:%Y-%m-%d %H:%M} UTC", version.note, changed,
        ]  # fmt: skip
        lines.append("\t".join(fields).rstrip("\t"))
    return lines


GOAL_COLUMNS = ("visitors", "events", "conversion", "revenue")


def goal_comparison_lines(comparison: GoalComparison) -> list[str]:
    """`tally whatif goals`: a heading, then per goal its numbers now and as proposed, tab-
    separated (as `tally goals list`); "—" where a goal is on one side only."""
    now = {row.goal: row for row in comparison.current}
    proposed = {row.goal: row for row in comparison.proposed}
    title = f"{comparison.site}: {comparison.start:%Y-%m-%d} to {comparison.end:%Y-%m-%d} (UTC, end excluded)"
    header = ["goal", *(f"{c} now" for c in GOAL_COLUMNS), *(f"{c} proposed" for c in GOAL_COLUMNS)]
    lines = [title, "\t".join(header)]
    for name in comparison.names():
        lines.append("\t".join([name, *_goal_cells(now.get(name)), *_goal_cells(proposed.get(name))]))
    return lines


def _goal_cells(row: GoalRow | None) -> list[str]:
    if row is None:
        return ["—"] * len(GOAL_COLUMNS)
    revenue = f"{row.revenue_total:.2f} {row.currency}" if row.currency else "—"
    return [f"{row.visitors:,}", f"{row.events:,}", f"{row.conversion_rate * 100:.1f}%", revenue]
