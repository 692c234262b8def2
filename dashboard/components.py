"""The dashboard's building blocks as Dash components: metric cards, breakdown lists, filter
chips, notices. Pure functions of the numbers; the callbacks decide which numbers."""

from __future__ import annotations

import base64

from dash import dcc, html

from dashboard import display
from dashboard.display import Metric
from storage.queries import BreakdownRow, PageEngagement
from storage.rate_limits import RateLimitStatus

# Breakdown values go into component ids, which Dash restricts; base64url keeps any path,
# quote or dot intact through the round trip.
BREAKDOWN_ITEM = "breakdown-item"
CHIP_REMOVE = "chip-remove"


def encode_value(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


def decode_value(encoded: str) -> str:
    return base64.urlsafe_b64decode(encoded.encode()).decode()


def notice(text: str, tone: str = "info") -> html.Div:
    return html.Div(text, className=f"notice notice-{tone}", role="status")


def metric_card(
    metric: Metric, current: float, previous: float | None, compared: str = "previous period"
) -> html.Div:
    """`previous` is None when the compared period (`compared` names it) had no traffic:
    nothing to compare with."""
    change = display.change(metric, current, previous) if previous is not None else display.NO_COMPARISON
    return html.Div(
        [
            html.Div(metric.label, className="metric-label"),
            html.Div(
                display.metric_value(metric, current),
                className="metric-value",
                id=f"metric-{metric.key}",
                **{"data-value": str(current)},
            ),
            html.Div(
                change.text,
                className=f"metric-change change-{change.tone}",
                id=f"change-{metric.key}",
                title=(
                    f"{compared}: {display.metric_value(metric, previous)}"
                    if previous is not None
                    else f"no page views in the {compared}"
                ),
            ),
        ],
        className="metric",
    )


def breakdown_list(
    rows: list[BreakdownRow],
    dimension: str,
    filter_dimension: str | None,
    empty: str,
    engagement: dict[str, PageEngagement] | None = None,
) -> html.Div | list:
    """Rows as Plausible shows them: a bar sized by visitors behind each value. A value is a
    button that filters the dashboard when `filter_dimension` is given. With `engagement` (the
    Pages panel) each page also shows its time on page and scroll depth ("-" without any)."""
    if not rows:
        return notice(empty)
    most = max(row.visitors for row in rows) or 1
    engaged = " with-engagement" if engagement is not None else ""
    header = html.Div(
        [
            html.Span(display.DIMENSION_LABELS[dimension], className="col-value"),
            html.Span("Visitors", className="col-number"),
            html.Span("Views", className="col-number"),
            *(
                [
                    html.Span("Time", className="col-number", title="Time on page: engaged time per visitor"),
                    html.Span("Scroll", className="col-number", title="Average deepest scroll depth"),
                ]
                if engagement is not None
                else []
            ),
        ],
        className=f"breakdown-header{engaged}",
    )
    return html.Div(
        [header, *(_breakdown_row(row, dimension, filter_dimension, most, engagement) for row in rows)]
    )


def _engagement_cells(page: PageEngagement | None) -> list[html.Span]:
    if page is None:
        return [html.Span("-", className="col-number muted"), html.Span("-", className="col-number muted")]
    return [
        html.Span(display.duration(page.time_on_page_s), className="col-number muted"),
        html.Span(f"{page.scroll_depth:.0f}%", className="col-number muted"),
    ]


def _breakdown_row(
    row: BreakdownRow,
    dimension: str,
    filter_dimension: str | None,
    most: int,
    engagement: dict[str, PageEngagement] | None = None,
) -> html.Div:
    label = display.dimension_value(dimension, row.value)
    value = (
        html.Button(
            label,
            id={"type": BREAKDOWN_ITEM, "dim": filter_dimension, "value": encode_value(row.value)},
            className="breakdown-link",
            title=f"Filter by {display.DIMENSION_LABELS[filter_dimension].lower()} {label}",
            n_clicks=0,
        )
        if filter_dimension
        else html.Span(label, className="breakdown-text", title=label)
    )
    return html.Div(
        [
            html.Div(className="breakdown-bar", style={"width": f"{row.visitors / most * 100:.1f}%"}),
            html.Div(value, className="col-value"),
            html.Span(display.count(row.visitors), className="col-number"),
            html.Span(display.count(row.pageviews), className="col-number muted"),
            *(_engagement_cells(engagement.get(row.value)) if engagement is not None else []),
        ],
        className="breakdown-row with-engagement" if engagement is not None else "breakdown-row",
    )


def filter_chip(dimension: str, value: str) -> html.Span:
    label = display.DIMENSION_LABELS.get(dimension, dimension)
    return html.Span(
        [
            html.Span([f"{label} is ", html.Strong(display.dimension_value(dimension, value))]),
            html.Button(
                "\u00d7",  # multiplication sign: the usual "remove" glyph
                id={"type": CHIP_REMOVE, "dim": dimension},
                className="chip-remove",
                title=f"Remove the {label.lower()} filter",
                **{"aria-label": f"Remove the {label.lower()} filter"},
                n_clicks=0,
            ),
        ],
        className="chip",
    )


def panel(title: str, body: list, tabs: dcc.RadioItems | None = None, **attributes: object) -> html.Section:
    heading = html.Div(
        [html.H2(title), tabs] if tabs is not None else [html.H2(title)], className="panel-heading"
    )
    return html.Section([heading, *body], className="card panel", **attributes)


def find(component: object, component_id: str) -> object | None:
    """The component with this id in a layout tree (depth first), or None."""
    if getattr(component, "id", None) == component_id:
        return component
    for child in panel_children(component):
        if (found := find(child, component_id)) is not None:
            return found
    return None


def panel_children(component: object) -> list:
    """A component's children as a list (none, one or many)."""
    children = getattr(component, "children", None)
    if isinstance(children, list | tuple):
        return list(children)
    return [] if children is None or isinstance(children, str) else [children]


def removable_list(
    items: list[tuple[html.Strong | html.Code, str, html.Button]],
    empty: str,
    item_class: str = "share-link",
    list_class: str = "share-links",
) -> html.Ul | html.P:
    """A settings panel's list of things one can take back: each item its name, details and the
    button that removes it (unsubscribe, revoke, remove), or a hint saying there is none."""
    if not items:
        return html.P(empty, className="hint")
    return html.Ul(
        [html.Li([name, f" · {details} ", button], className=item_class) for name, details, button in items],
        className=list_class,
    )


def panel_tabs(component_id: str, labels: dict[str, str]) -> dcc.RadioItems:
    """Small tabs in a panel's heading (Top pages / Entry pages / Exit pages), keyed by dimension."""
    return dcc.RadioItems(
        id=component_id,
        options=[{"label": label, "value": dimension} for dimension, label in labels.items()],
        value=next(iter(labels)),
        inline=True,
        className="panel-tabs",
        inputClassName="panel-tab-input",
        labelClassName="panel-tab",
    )


def rate_limit_panel(status: RateLimitStatus, limit: int, window_s: int) -> html.Div:
    if not status.available:
        return notice(status.note or "No rate-limit data.")
    window = f"{window_s // 60} min" if window_s < 3600 else f"{window_s / 3600:g} h"
    blocked = html.Div(
        [
            html.Span(f"{status.blocked_now:,}", className="big-number", id="blocked-now"),
            f" clients blocked now (over {limit:,} page views in {window})",
        ],
        className="realtime-total",
    )
    if not status.offenders:
        return html.Div([blocked, notice("No client has sent page views in the current window.")])
    most = max(offender.pageviews for offender in status.offenders) or 1
    header = html.Div(
        [
            html.Span("Busiest clients (hashed)", className="col-value"),
            html.Span(f"Views / {window}", className="col-number wide"),
        ],
        className="breakdown-header two-columns",
    )
    rows = [
        html.Div(
            [
                html.Div(
                    className=f"breakdown-bar{' over-limit' if offender.blocked else ''}",
                    style={"width": f"{offender.pageviews / most * 100:.1f}%"},
                ),
                html.Div(
                    [
                        html.Code(offender.client),
                        html.Span(" blocked", className="blocked") if offender.blocked else "",
                    ],
                    className="col-value",
                ),
                html.Span(display.count(offender.pageviews), className="col-number"),
            ],
            className="breakdown-row two-columns",
        )
        for offender in status.offenders
    ]
    return html.Div([blocked, header, *rows])
