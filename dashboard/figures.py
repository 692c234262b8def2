"""The dashboard's Plotly figures: the main time-series chart, the live per-minute bars and
the countries map, plus the empty figure that carries a message instead of a chart."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from zoneinfo import ZoneInfo

import plotly.graph_objects as go

from dashboard.countries import alpha3, country_name
from storage.annotations import Annotation
from storage.calendar import UTC_NAME, zone
from storage.queries import BreakdownRow, Point

ACCENT = "#4f46e5"
PREVIOUS = "#98a1b3"
GRID = "#e6e8ef"
TEXT = "#1f2430"
NOTE = "#d97706"  # an annotation's marker
FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "color": TEXT, "size": 13}
TIME_FORMATS = {
    "minute": "%H:%M", "hour": "%d %b %H:%M", "day": "%a %d %b", "week": "%d %b", "month": "%b %Y",
}  # fmt: skip


def _base_layout(figure: go.Figure, height: int) -> go.Figure:
    figure.update_layout(
        height=height,
        margin={"l": 44, "r": 12, "t": 12, "b": 36},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=FONT,
        hovermode="x unified",
        showlegend=False,
    )
    figure.update_xaxes(showgrid=False, linecolor=GRID)
    figure.update_yaxes(gridcolor=GRID, zeroline=False, rangemode="tozero", tickformat=",d")
    return figure


def _whole_number_ticks(figure: go.Figure, values: list[int]) -> None:
    """Counts are whole numbers: for small ones, plotly's automatic ticks (0, 0.5, 1) would
    print as 0, 1, 1 once formatted as integers."""
    if max(values, default=0) < 5:
        figure.update_yaxes(range=[0, 5], dtick=1)


def message(text: str, height: int = 260) -> go.Figure:
    """An empty chart with a sentence in the middle: for no data, and for errors."""
    figure = go.Figure()
    figure.update_layout(
        height=height,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[{"text": text, "showarrow": False, "font": {**FONT, "size": 15, "color": "#5b6275"}}],
    )
    return figure


def timeseries(
    current: list[Point],
    previous: list[Point],
    metric: str,
    label: str,
    interval: str,
    timezone: str = "UTC",
    compared: str = "previous period",
    notes: Sequence[Annotation] = (),
) -> go.Figure:
    """The period as a filled line, the compared period dashed behind it, bucket by bucket, and
    each annotation of the period as a vertical marker. Times are shown on the site's wall clock
    (plotly draws a date-time's own clock time)."""
    tz = zone(timezone)
    x = [point.t.astimezone(tz).replace(tzinfo=None) for point in current]
    hover_time = TIME_FORMATS.get(interval, "%d %b %H:%M")
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=x[: len(previous)],
            y=[getattr(point, metric) for point in previous],
            customdata=[point.t.astimezone(tz).replace(tzinfo=None) for point in previous],
            name=compared,
            mode="lines",
            line={"color": PREVIOUS, "dash": "dash", "width": 2},
            hovertemplate=f"{compared} (%{{customdata|{hover_time}}}): %{{y:,}}<extra></extra>",
        )
    )
    figure.add_trace(
        go.Scatter(
            x=x,
            y=[getattr(point, metric) for point in current],
            name=label,
            mode="lines+markers" if len(current) <= 31 else "lines",
            line={"color": ACCENT, "width": 3},
            marker={"size": 6},
            fill="tozeroy",
            fillcolor="rgba(79,70,229,0.08)",
            hovertemplate=f"{label}: %{{y:,}}<extra></extra>",
        )
    )
    figure = _base_layout(figure, 280)
    figure.update_xaxes(tickformat=TIME_FORMATS.get(interval))
    _whole_number_ticks(figure, [getattr(p, metric) for p in [*current, *previous]])
    mark_annotations(figure, notes, tz)
    return figure


def mark_annotations(figure: go.Figure, notes: Sequence[Annotation], tz: ZoneInfo) -> None:
    """Each annotation as a dotted vertical line across a time chart with a marker at its top whose
    hover label is the annotation (Tally's own in grey); every time chart that spans annotations
    (the "Over time" chart, the live per-minute bars) draws them with this. Layout shapes and
    annotations, not traces: the chart's traces stay its data. Plotly reads labels as a subset of
    HTML, so the text is escaped: a note shows as it was written, never as markup."""
    for note in notes:
        x = note.at.astimezone(tz).replace(tzinfo=None)
        color = PREVIOUS if note.automatic else NOTE
        when = note.day.strftime("%d %b %Y") if note.day else x.strftime("%d %b %Y %H:%M")
        who = f" · {note.author}" if note.author and not note.automatic else ""
        label = "<br>".join(escape(line) for line in _wrapped(f"{note.text}", 60))
        figure.add_shape(
            type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="paper",
            line={"color": color, "width": 1.5, "dash": "dot"}, layer="below",
        )  # fmt: skip
        figure.add_annotation(
            x=x, xref="x", y=1, yref="paper", yanchor="bottom", text="▼", showarrow=False,
            font={"color": color, "size": 12}, name=f"annotation-{note.id}",
            hovertext=f"{escape(when)} · {escape(note.kind)}{escape(who)}<br>{label}",
            hoverlabel={"bgcolor": "white", "bordercolor": color, "font": {**FONT, "size": 12}},
        )  # fmt: skip
    if notes:
        figure.update_layout(margin={"t": 24})


def _wrapped(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def per_minute(points: list[Point], notes: Sequence[Annotation] = ()) -> go.Figure:
    """Page views per minute as bars (the Overview's live chart, in UTC), with the annotations of
    its hour marked as on the "Over time" chart."""
    if not any(point.pageviews for point in points):
        return message("No page views in the last hour.", 160)
    figure = go.Figure(
        go.Bar(
            x=[point.t for point in points],
            y=[point.pageviews for point in points],
            name="page views",
            marker_color=ACCENT,
            hovertemplate="%{x|%H:%M}: %{y:,} page views<extra></extra>",
        )
    )
    figure = _base_layout(figure, 160)
    figure.update_layout(margin={"l": 36, "r": 8, "t": 8, "b": 28}, bargap=0.15)
    figure.update_xaxes(tickformat="%H:%M")
    _whole_number_ticks(figure, [point.pageviews for point in points])
    mark_annotations(figure, notes, zone(UTC_NAME))
    return figure


def countries_map(rows: list[BreakdownRow]) -> go.Figure:
    """Visitors per country. Shapes are keyed by ISO alpha-3; events carry alpha-2, kept in
    customdata so that a click can filter by the event's own value. Without a known country, a
    sentence: the map's shapes (a topojson file the browser fetches, then projects) only when
    they have something to show."""
    known = [row for row in rows if alpha3(row.value)]
    if not known:
        return message("No countries in this period.", 240)
    figure = go.Figure(
        go.Choropleth(
            locations=[alpha3(row.value) for row in known],
            locationmode="ISO-3",
            z=[row.visitors for row in known],
            customdata=[row.value for row in known],
            text=[country_name(row.value) for row in known],
            colorscale=[[0, "#dcdafb"], [1, ACCENT]],
            marker_line_color="#ffffff",
            marker_line_width=0.5,
            showscale=False,
            hovertemplate="%{text}: %{z:,} visitors<extra></extra>",
        )
    )
    figure.update_geos(
        projection_type="natural earth",
        showframe=False,
        showcoastlines=False,
        showcountries=True,
        countrycolor="#ffffff",
        showland=True,
        landcolor="#eceef3",
        bgcolor="rgba(0,0,0,0)",
        lataxis_range=[-58, 85],
    )
    figure.update_layout(
        height=240, margin={"l": 0, "r": 0, "t": 0, "b": 0}, paper_bgcolor="rgba(0,0,0,0)", font=FONT
    )
    return figure
