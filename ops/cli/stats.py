"""`tally stats` and `tally realtime`: a site's numbers on the command line, as the stats API gives
them. The options are the API's parameters (`--period 7d --compare previous_period --by channel`,
`--by event:name`, `--by prop:plan --goal Signup`, `--goals`) and go through the same checks
(dashboard/http_api/parameters.py), the same question builder (storage/queries/questions.py) and the
same answers (dashboard/http_api/answers.py: no Flask app), so a number here is the number
`/api/v1/stats/aggregate`, `/breakdown`, `/goals` and `/realtime` answer for the same arguments.
Tab-separated lines, or `--json` for the API's JSON.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from dashboard.http_api.parameters import BadParameter
from ops.cli.context import Stack
from ops.cli_errors import OneLineErrors, UserError

SOURCES = ("agg", "raw")


class StatsCommand(OneLineErrors, click.Command):
    """One-line errors; a refused option is named as the CLI spells it (`--period: …`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """`tally stats retention SITE …` is `tally stats SITE --retention …` (two words before
        any option: a site alone is never followed by another)."""
        if len(args) >= 2 and args[0] == "retention" and not args[1].startswith("-"):
            args = [args[1], "--retention", *args[2:]]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as failure:
            message = failure.format_message()
            name = message.partition(":")[0]
            options = {p.name.rstrip("_") for p in self.params if isinstance(p, click.Option) and p.name}
            if name in options:
                failure.message = f"--{name}{message[len(name) :]}"
            raise


def arguments(site: str, **options: str | None) -> Any:
    """The options as the API's query string (only those given)."""
    from dashboard.http_api.parameters import Arguments

    given = {name: [value] for name, value in options.items() if value is not None}
    return Arguments.parse({"site": [site], **given})


@click.command("stats", cls=StatsCommand)
@click.argument("site")
@click.option(
    "--period", default=None, help="today, yesterday, 24h, 7d, 30d, month, last_month, year, 12mo, all."
)
@click.option("--from", "from_", default=None, help="Start (ISO date or date-time; the site's zone).")
@click.option("--to", default=None, help="End, exclusive.")
@click.option("--compare", default=None, help="previous_period or year_over_year: adds each number's change.")
@click.option(
    "--by",
    default=None,
    help="A dimension (path, referrer_domain, channel, country, …), event:name (custom events) or "
    "prop:KEY (a property's values).",
)
@click.option("--goal", default=None, help="With --by prop:KEY: that goal's events only.")
@click.option("--goals", "goals", is_flag=True, help="Each goal's conversions (as /api/v1/stats/goals).")
@click.option(
    "--vitals",
    "web_vitals",
    is_flag=True,
    help="Web Vitals: p50, p75, p95 and ratings of LCP, CLS, INP, FCP, TTFB (as /api/v1/stats/vitals).",
)
@click.option(
    "--property",
    default=None,
    help="With --vitals: event:page, visit:device, visit:country or visit:browser.",
)
@click.option(
    "--retention",
    "retention",
    is_flag=True,
    help="Weekly cohorts of first visit and the share back each later week (as /api/v1/stats/retention; "
    "also `tally stats retention SITE`).",
)
@click.option("--weeks", default=None, help="With --retention: how many weeks (1-12, default 12).")
@click.option("--until", default=None, help="With --retention: a day (YYYY-MM-DD) of the last week shown.")
@click.option(
    "--interval", default=None, help="minute, hour, day, week or month: each one's numbers (a timeseries)."
)
@click.option("--limit", default=None, help="Rows of a breakdown (default 10).")
@click.option("--filters", default=None, help='JSON, as the API takes it: {"country": "DE"}.')
@click.option("--source", default=None, help="agg (the rollups, default) or raw (the archive).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")
@click.pass_obj
def stats(
    stack: Stack,
    site: str,
    from_: str | None,
    as_json: bool,
    goals: bool,
    web_vitals: bool,
    retention: bool,
    **options: str | None,
) -> None:
    """SITE's numbers over a range: the top-line metrics, a breakdown with --by, the goals'
    conversions with --goals, the Web Vitals with --vitals, the weekly cohorts with --retention, or
    each day's (hour's…) with --interval."""
    if retention:
        answer = retention_answer(stack, site, from_, options)
        click.echo(json.dumps(answer) if as_json else "\n".join(retention_lines(answer)))
        return
    for only in ("weeks", "until"):
        if options.get(only) is not None:
            raise BadParameter(only, "only with --retention")
        options.pop(only, None)
    if web_vitals:
        answer = vitals_answer(stack, site, from_, options)
        if as_json:
            click.echo(json.dumps(answer))
        for row in [] if as_json else answer:
            for line in vitals_lines(row):
                click.echo("\t".join(line))
        return
    if options.get("property") is not None:
        raise BadParameter("property", "only with --vitals")
    options.pop("property", None)
    answer = stats_answer(stack, site, from_, options, goals)
    if as_json:
        click.echo(json.dumps(answer, default=str))
    elif isinstance(answer, list):
        for row in answer:
            click.echo("\t".join(printed(row)))
    else:
        for name, value in answer.items():
            if name not in ("comparison", "change"):
                change = answer.get("change", {}).get(name, "")
                click.echo("\t".join([name, str(value), *([] if "change" not in answer else [str(change)])]))


def printed(row: dict[str, Any]) -> list[str]:
    """A breakdown's or a goal's row as tab-separated columns: its name first, then its numbers."""
    if "goal" in row:  # goal, visitors, events, conversion rate, then revenue (total, currency)
        revenue = row["revenue"]
        money = [revenue["total"], revenue["currency"]] if revenue else []
        return [str(row[name]) for name in ("goal", "visitors", "events", "conversion_rate")] + money
    numbers = ("events", "visitors") if "events" in row else ("pageviews", "visitors")
    return [str(row["t" if "t" in row else "value"]), *(str(row[name]) for name in numbers)]


def stats_answer(
    stack: Stack, site: str, from_: str | None, options: dict[str, str | None], goals: bool = False
) -> Any:
    from dashboard.http_api import answers, parameters
    from storage import queries
    from storage.definitions import CurrentDefinitions
    from storage.sites import site_timezone

    # The options are checked before the store is asked; the range needs the site's zone.
    asked = arguments(site, **{"from": from_}, **options)
    if asked.get("by") is not None and asked.get("compare") is not None:
        raise BadParameter("compare", "with --by: not available (the API compares aggregates and timeseries)")
    name, source = parameters.site(asked), parameters.source(asked)
    by = parameters.dimension(asked) if asked.get("by") is not None else None
    goal = parameters.goal(asked, by or "")
    if goals and (by is not None or asked.get("compare") is not None):
        raise BadParameter("goals", "a report of its own: not with --by or --compare")
    if asked.get("interval") is not None and (by is not None or goals):
        raise BadParameter("interval", "a timeseries of the top-line numbers: not with --by or --goals")
    limit = parameters.limit(asked, 10)
    settings, client = stack.settings, stack.client
    defined = CurrentDefinitions(settings, lambda: client).settings()  # as the API reads them
    first_day = queries.first_day(client, name) if asked.get("period") == "all" else None
    q, compared = parameters.window_queries(
        asked, datetime.now(UTC), defined, site_timezone(client, name), first_day
    )
    if goals:
        return answers.goals(client, q, source)
    if asked.get("interval") is not None:
        return answers.timeseries(client, q, compared, parameters.interval(asked, q), source)
    if by is not None:
        return answers.breakdown(client, q, by, goal, limit, source)
    return answers.aggregate(client, q, compared, source)


def vitals_answer(stack: Stack, site: str, from_: str | None, options: dict[str, str | None]) -> Any:
    """The Web Vitals report as /api/v1/stats/vitals answers it (storage/queries/vitals.py)."""
    from dashboard.http_api import answers, parameters
    from storage.definitions import CurrentDefinitions
    from storage.queries import vitals
    from storage.sites import site_timezone

    for other in ("by", "goal", "interval", "compare"):
        if options.get(other) is not None:
            raise BadParameter(other, "not with --vitals")
    asked = arguments(site, **{"from": from_}, **options)
    name, source = parameters.site(asked), parameters.source(asked)
    breakdown, limit = parameters.vitals_property(asked), parameters.limit(asked, 10)
    settings, client = stack.settings, stack.client
    defined = CurrentDefinitions(settings, lambda: client).settings()
    q, _ = parameters.window_queries(asked, datetime.now(UTC), defined, site_timezone(client, name))
    if q.filtered:
        raise BadParameter("filters", "the Web Vitals report takes no filters")
    return [answers.vitals_json(row) for row in vitals.vitals(client, q, breakdown, limit, source)]


def vitals_lines(row: dict[str, Any]) -> list[list[str]]:
    """A Web Vitals row as one line per vital: value ('' for the site), vital, page views
    measured, p50, p75, p95, then the percent rated good, needs improvement, poor."""
    numbers = ("measured", "p50", "p75", "p95", "good", "needs_improvement", "poor")
    value = row["value"] or ""
    return [
        [value, vital, *(str(summary[n]) for n in numbers)]
        for vital, summary in row.items()
        if vital != "value"
    ]


def retention_answer(stack: Stack, site: str, from_: str | None, options: dict[str, str | None]) -> Any:
    """The retention report as /api/v1/stats/retention answers it (storage/queries/retention.py)."""
    from dashboard.http_api import answers, parameters
    from storage.calendar import local_date, zone
    from storage.definitions import CurrentDefinitions
    from storage.queries.retention import retention
    from storage.sites import site_timezone

    given = {name for name, value in options.items() if value is not None} | ({"from"} if from_ else set())
    others = sorted(given - {"weeks", "until", "source"})
    if others:
        raise BadParameter(others[0], "not with --retention (it takes --weeks, --until and --source)")
    asked = arguments(
        site, weeks=options.get("weeks"), until=options.get("until"), source=options.get("source")
    )
    name, source = parameters.site(asked), parameters.source(asked)
    client = stack.client
    timezone = site_timezone(client, name)
    weeks = parameters.retention_weeks(asked, local_date(datetime.now(UTC), zone(timezone)))
    gap_s = CurrentDefinitions(stack.settings, lambda: client).settings().session_gap_s
    report = retention(client, name, weeks, timezone, gap_s, source)
    return {"site": name, **answers.retention_json(report, timezone, source)}


def retention_lines(answer: dict[str, Any]) -> list[str]:
    """The identity the numbers rest on, then per cohort: its week, its visitors, and each later
    week's returning visitors with their share (tab-separated); a cohort's note on a line of its own."""
    lines = [
        "\t".join(
            [
                "identity",
                change["rotation"],
                f"since {change['since']}" if change["since"] else "from the start",
            ]
        )
        for change in answer["identity"]
    ]
    lines.append(f"# {answer['identity_note']}")
    lines.append("\t".join(["week", "visitors", *(f"+{n}" for n in range(1, len(answer["weeks"])))]))
    for cohort in answer["cohorts"]:
        later = [
            f"{n} ({share:.1%})" for n, share in zip(cohort["returning"], cohort["retention"], strict=True)
        ]
        lines.append("\t".join([cohort["week"], str(cohort["visitors"]), *later]))
        if cohort["note"]:
            lines.append(f"# {cohort['week']}: {cohort['note']}")
    return lines


@click.command("realtime", cls=StatsCommand)
@click.argument("site")
@click.option("--breakdown", default=None, help="pages, sources or countries: the last 30 minutes by it.")
@click.option("--limit", default=None, help="Rows of the breakdown (default 10).")
@click.option("--source", default=None, help="Live counts from agg (default) or raw; a breakdown: raw.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")
@click.pass_obj
def realtime(stack: Stack, site: str, as_json: bool, **options: str | None) -> None:
    """SITE's live visitors (last 5 minutes), or the last 30 minutes by pages, sources, countries."""
    from dashboard.http_api import parameters
    from storage import queries
    from storage.queries.realtime_breakdowns import realtime_breakdown

    client, now = stack.client, datetime.now(UTC)
    asked = arguments(site, **options)
    name, limit = parameters.site(asked), parameters.limit(asked, 10)
    breakdown, source = parameters.realtime_breakdown(asked), parameters.source(asked)
    if breakdown is None:
        live = queries.realtime(client, name, now=now, source=source)
        click.echo(json.dumps(live) if as_json else "\n".join(f"{k}\t{v}" for k, v in live.items()))
        return
    report = realtime_breakdown(client, name, breakdown, now, limit)
    rows = [{"value": r.value, "visitors": r.visitors, "pageviews": r.pageviews} for r in report.rows]
    if as_json:
        click.echo(json.dumps({"visitors": report.visitors, "pageviews": report.pageviews, "results": rows}))
        return
    click.echo(f"visitors\t{report.visitors}\npageviews\t{report.pageviews}")
    for row in rows:
        click.echo(f"{row['value']}\t{row['visitors']}\t{row['pageviews']}")


COMMANDS = (stats, realtime)
