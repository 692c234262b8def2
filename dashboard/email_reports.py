"""Weekly and monthly email reports: numbers, rendering, sending (docs/architecture.md, "Email reports").

A report holds the key numbers of the period (visitors, page views, visits, bounce rate, visit
duration, each with its change against the period before), the top pages and sources, and a
chart of visitors per day: a PNG drawn with Pillow and attached inline (`cid:`), since mail clients
strip inline SVG and a report must fetch nothing from outside. The same numbers go in a text
part. Numbers come from the query layer exactly as the stats API answers them.

Who sends: the background-jobs process (dashboard/jobs.py) runs `send_due` when `TALLY_SMTP_HOST`
is set, every `TALLY_REPORTS_INTERVAL_S`; `tally reports send` sends what is due at once (for cron,
or to try a setup). Both send only reports not yet recorded as delivered
(storage/report_subscriptions.py), so they can run side by side.
"""

from __future__ import annotations

import html
import io
import smtplib
import ssl
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid

import structlog
from clickhouse_connect.driver.client import Client
from PIL import Image, ImageDraw

from dashboard import display
from storage import annotations, definitions, queries
from storage.annotations import Annotation
from storage.calendar import local_date, zone
from storage.queries import BreakdownRow, Source, questions
from storage.report_subscriptions import ReportPeriod, Subscription, due, record_delivery
from tally.refusal import Refused
from tally.settings import Settings

log = structlog.get_logger()

TOP_ROWS = 5
CHART_WIDTH, CHART_HEIGHT = 560, 140
BAR_COLOUR = (91, 80, 230)
AXIS_COLOUR = (200, 204, 214)
PERIOD_WORDS = {"weekly": "week", "monthly": "month"}


@dataclass(frozen=True)
class Report:
    site: str
    period: ReportPeriod
    current: dict[str, float]  # queries.aggregate's numbers
    previous: dict[str, float]
    days: list[tuple[date, int]]  # visitors per day of the period
    pages: list[BreakdownRow]
    sources: list[BreakdownRow]
    notes: tuple[Annotation, ...] = ()  # the period's annotations, Tally's own included


def build_report(
    client: Client, site: str, period: ReportPeriod, source: Source, defined: questions.VisitDefinitions
) -> Report:
    """The period's numbers in the site's time zone: its local days, as the dashboard shows them,
    with the definitions the dashboard reads with (the engaged-bounce threshold too)."""
    q = questions.question(site, *period.span, defined, timezone=period.timezone)
    previous = questions.over(q, period.previous_span)
    tz = zone(period.timezone)
    points = queries.timeseries(client, q, "day", source=source)
    visitors = {local_date(point.t, tz): point.visitors for point in points}
    days = [period.first + timedelta(days=n) for n in range((period.last - period.first).days + 1)]
    return Report(
        site,
        period,
        queries.aggregate(client, q, source=source),
        queries.aggregate(client, previous, source=source),
        [(day, visitors.get(day, 0)) for day in days],
        queries.breakdown(client, q, "path", TOP_ROWS, source=source),
        queries.breakdown(client, q, "referrer_domain", TOP_ROWS, source=source),
        tuple(annotations.list_annotations(client, site, *period.span)),
    )


# --- the chart: a PNG of visitors per day, drawn with Pillow's ImageDraw ---------------------


def chart_png(values: list[int], width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> bytes:
    """Bars of `values` on a white ground with a baseline, as PNG bytes."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    top = max(values, default=0)
    slot = width / max(len(values), 1)
    for index, value in enumerate(values):
        bar = round((height - 8) * value / top) if top else 0
        if not bar:
            continue  # a day without visitors: no bar, the baseline shows it
        left, right = round(index * slot + slot * 0.15), round((index + 1) * slot - slot * 0.15)
        # rectangle's corners are inclusive: the bar ends on the row above the baseline
        draw.rectangle((left, height - 1 - bar, max(right, left + 1) - 1, height - 2), fill=BAR_COLOUR)
    draw.line((0, height - 1, width - 1, height - 1), fill=AXIS_COLOUR)
    encoded = io.BytesIO()
    image.save(encoded, format="PNG", optimize=True)
    return encoded.getvalue()


# --- rendering ----------------------------------------------------------------------------


def subject(report: Report) -> str:
    word = PERIOD_WORDS[report.period.frequency]
    return f"{report.site}: your {word} of {report.period.first} to {report.period.last}"


def metric_lines(report: Report) -> list[tuple[display.Metric, str, str]]:
    """(metric, value, change against the previous period) as the dashboard writes them."""
    compared = report.previous if report.previous["pageviews"] else {}
    lines = []
    for metric in display.METRICS:
        value = display.metric_value(metric, report.current[metric.key])
        before = compared.get(metric.key)
        change = display.change(metric, report.current[metric.key], before) if before is not None else None
        lines.append((metric, value, change.text if change else "new"))
    return lines


def text_part(report: Report) -> str:
    word = PERIOD_WORDS[report.period.frequency]
    lines = [subject(report), ""]
    lines += [
        f"{metric.label}: {value} ({change} vs the previous {word})"
        for metric, value, change in metric_lines(report)
    ]
    if report.notes:
        lines += [
            "",
            "Annotations:",
            *[f"  {when(note, report)} ({note.kind}): {note.text}" for note in report.notes],
        ]
    lines += ["", "Top pages:", *_rows_text("path", report.pages)]
    lines += ["", "Top sources:", *_rows_text("referrer_domain", report.sources)]
    lines += ["", f"Visitors per day ({report.period.timezone}):"]
    lines += [f"  {day}: {visitors}" for day, visitors in report.days]
    return "\n".join(lines) + "\n"


def _rows_text(dimension: str, rows: list[BreakdownRow]) -> list[str]:
    if not rows:
        return ["  (none)"]
    return [f"  {display.dimension_value(dimension, row.value)}: {row.visitors} visitors" for row in rows]


def html_part(report: Report, chart_cid: str) -> str:
    word = PERIOD_WORDS[report.period.frequency]
    cells = "".join(
        f'<td style="padding:8px 12px;border:1px solid #e4e6ee"><div style="color:#5b6275;font-size:12px">'
        f"{html.escape(metric.label)}</div>"
        f'<div style="font-size:22px;font-weight:700" data-metric="{metric.key}">'
        f'{html.escape(value)}</div><div style="color:#5b6275;font-size:12px" data-change="{metric.key}">'
        f"{html.escape(change)} vs the previous {word}</div></td>"
        for metric, value, change in metric_lines(report)
    )
    first, last = report.period.first, report.period.last
    return (
        '<!doctype html><html><body style="font-family:Arial,sans-serif;color:#1d2433;margin:0;padding:16px">'
        f'<h1 style="font-size:18px">{html.escape(subject(report))}</h1>'
        f'<table style="border-collapse:collapse"><tr>{cells}</tr></table>'
        f"{_notes_html(report)}"
        f'<h2 style="font-size:15px">Visitors per day, {first} to {last} '
        f"({html.escape(report.period.timezone)})</h2>"
        f'<img src="cid:{chart_cid[1:-1]}" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
        'alt="Visitors per day" style="display:block;max-width:100%;height:auto">'
        f"{_rows_html('Top pages', 'path', report.pages)}"
        f"{_rows_html('Top sources', 'referrer_domain', report.sources)}"
        '<p style="color:#5b6275;font-size:12px">Sent by Tally. Unsubscribe with '
        f"<code>tally reports unsubscribe {html.escape(report.site)} EMAIL</code>.</p>"
        "</body></html>"
    )


def when(note: Annotation, report: Report) -> str:
    """An annotation's date, or its time on the site's clock."""
    if note.day is not None:
        return note.day.isoformat()
    return note.at.astimezone(zone(report.period.timezone)).strftime("%Y-%m-%d %H:%M")


def _notes_html(report: Report) -> str:
    """The period's annotations under the numbers; their text escaped (data, never markup)."""
    if not report.notes:
        return ""
    items = "".join(
        f'<li data-annotation="{html.escape(note.id)}">{html.escape(when(note, report))} '
        f'<span style="color:#5b6275">({html.escape(note.kind)})</span>: {html.escape(note.text)}</li>'
        for note in report.notes
    )
    return f'<h2 style="font-size:15px">Annotations</h2><ul style="padding-left:18px">{items}</ul>'


def _rows_html(title: str, dimension: str, rows: list[BreakdownRow]) -> str:
    body = (
        "".join(
            f'<tr data-row="{dimension}"><td style="padding:4px 12px 4px 0">'
            f"{html.escape(display.dimension_value(dimension, row.value))}</td>"
            f'<td style="text-align:right">{row.visitors}</td></tr>'
            for row in rows
        )
        or '<tr><td style="color:#5b6275">(none)</td></tr>'
    )
    return (
        f'<h2 style="font-size:15px">{title}</h2><table style="border-collapse:collapse">'
        f'<tr><th style="text-align:left">{display.DIMENSION_LABELS[dimension]}</th>'
        f'<th style="text-align:right">Visitors</th></tr>{body}</table>'
    )


def message(report: Report, sender: str, recipient: str) -> EmailMessage:
    """multipart/alternative: the text part, and the HTML part with its chart (multipart/related)."""
    mail = EmailMessage()
    mail["Subject"] = subject(report)
    mail["From"] = sender
    mail["To"] = recipient
    mail.set_content(text_part(report))
    chart_cid = make_msgid(domain="tally.report")
    mail.add_alternative(html_part(report, chart_cid), subtype="html")
    html_body = mail.get_payload()[1]
    html_body.add_related(chart_png([visitors for _, visitors in report.days]), "image", "png", cid=chart_cid)
    return mail


# --- sending ------------------------------------------------------------------------------

Sent = tuple[Subscription, ReportPeriod]


def send_due(settings: Settings, client: Client, now: datetime) -> list[Sent]:
    """Send every report due at `now` (each site's periods end at its own midnight) over one
    SMTP connection, recording each once accepted. Nothing is due: no connection is opened."""
    pending = due(client, now)
    if not pending:
        return []
    if not settings.smtp_host:
        raise ReportsNotConfigured(
            "no SMTP server: set TALLY_SMTP_HOST (and TALLY_SMTP_PORT, _USER, _PASSWORD, _FROM)"
        )
    sent: list[Sent] = []
    # The current definitions version's (storage/definitions.py), the environment's before one:
    # the gap and the engaged-bounce threshold the dashboard and the API read with.
    defined = definitions.CurrentDefinitions(settings, lambda: client).settings()
    with smtp_connection(settings) as smtp:
        for subscription, period in pending:
            report = build_report(client, subscription.site, period, settings.dashboard_source, defined)
            smtp.send_message(message(report, settings.smtp_from, subscription.email))
            record_delivery(client, subscription, period)
            sent.append((subscription, period))
    return sent


class ReportsNotConfigured(Refused):
    """Reports are due but no SMTP server is configured."""

    kind = "not_configured"


def smtp_connection(settings: Settings) -> smtplib.SMTP:
    smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=30)
    try:
        if settings.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp_user:
            smtp.login(settings.smtp_user, settings.smtp_password)
    except BaseException:
        smtp.close()
        raise
    return smtp
