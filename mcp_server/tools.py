"""The MCP server and its tools: each one read-only question to the dashboard's APIs, asked with
the caller's key (`KeyOf`: the stdio key, or the HTTP request's Bearer token), its answer cut to
`max_rows` rows with a note saying so.

Parameters keep the APIs' names and meanings (`period`, `from`/`to` as `date_from`/`date_to`,
`filters`, `by`, Plausible's v2 body), so a question asked here is the question `/api/v1` or
`/api/v2/query` answers, and gets the same number (DESIGN.md: every front door asks one engine).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcp_server.api import TallyApi

#: Whose key a call carries, from the call's context.
KeyOf = Callable[[Context], str]

INSTRUCTIONS = (
    "Tally's web analytics, read-only. Start with list_sites to learn the site names the key may "
    "read; then aggregate (top-line numbers), timeseries, breakdown, goals, funnel, realtime, or "
    "query (Plausible's Stats API v2 for several dimensions and filters). provenance tells where a "
    "figure came from. Times are UTC ISO-8601; `to` is exclusive on the v1 tools. Answers hold at "
    "most {rows} rows and say when they were cut."
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

Site = Annotated[str, Field(description="The site's domain, as list_sites names it (example.com).")]
Period = Annotated[
    Literal["today", "yesterday", "24h", "7d", "30d", "month", "last_month", "year", "12mo", "all"] | None,
    Field(description="A preset range in the site's time zone; or give date_from/date_to. Default: 30 days."),
]
DateFrom = Annotated[
    str | None, Field(description="Start, ISO-8601 date or date-time (the site's zone), with date_to.")
]
DateTo = Annotated[str | None, Field(description="End, exclusive; default now.")]
Filters = Annotated[
    dict[str, str] | list[Any] | None,
    Field(
        description='Equality filters {"path": "/pricing", "country": "DE"}, or Plausible-style '
        'filters with Tally\'s dimension names, e.g. [["contains", "path", ["/blog"]]].'
    ),
]
Source = Annotated[
    Literal["agg", "raw"] | None,
    Field(description="agg: the derived tables (default where one exists); raw: the event archive."),
]
Compare = Annotated[
    Literal["previous_period", "year_over_year"] | None,
    Field(description="Add each number's value over the compared range."),
]


def range_params(
    site: str,
    period: str | None,
    date_from: str | None,
    date_to: str | None,
    filters: dict[str, str] | list[Any] | None,
    source: str | None,
    **more: str | int | None,
) -> dict[str, str]:
    """The query string of a /api/v1 stats call: only what was given."""
    given: dict[str, object] = {
        "site": site,
        "period": period,
        "from": date_from,
        "to": date_to,
        "filters": json.dumps(filters) if filters else None,
        "source": source,
        **more,
    }
    return {name: str(value) for name, value in given.items() if value is not None}


def bounded(answer: Any, max_rows: int) -> dict[str, Any]:
    """`answer` as one JSON object with its rows cut to `max_rows`: a list becomes `results` (an MCP
    tool's list would be one content block per item, none for an empty list), and the list under
    `results`, `sites` or `rows` is cut; a cut answer says so in `note` (the rows shown, the rows
    there were, the cap)."""
    if isinstance(answer, list):
        if len(answer) <= max_rows:
            return {"results": answer}
        return {"results": answer[:max_rows], "note": cut_note(max_rows, len(answer))}
    if not isinstance(answer, dict):
        return {"result": answer}
    for name in ("results", "sites", "rows"):
        rows = answer.get(name)
        if isinstance(rows, list) and len(rows) > max_rows:
            return answer | {name: rows[:max_rows], "note": cut_note(max_rows, len(rows))}
    return answer


def cut_note(max_rows: int, total: int | None) -> str:
    there = f"of {total} " if total is not None else ""
    return (
        f"showing the first {max_rows} rows {there}(tally mcp answers with at most {max_rows} rows, "
        "TALLY_MCP_MAX_ROWS); narrow the question or ask for fewer rows"
    )


def build_server(api: TallyApi, key_of: KeyOf) -> MCPServer:
    """The MCP server with every tool, each asking `api` with the key `key_of` finds."""
    max_rows = api.settings.max_rows
    server = MCPServer(
        "tally", title="Tally analytics (read-only)", instructions=INSTRUCTIONS.format(rows=max_rows)
    )

    async def get(ctx: Context, path: str, params: dict[str, str]) -> dict[str, Any]:
        return bounded(await api.get(key_of(ctx), path, params), max_rows)

    @server.tool(annotations=READ_ONLY)
    async def list_sites(ctx: Context) -> dict[str, Any]:
        """The sites this key may read: each site's domain and time zone."""
        answer = await api.get(key_of(ctx), "/api/v1/sites", {"limit": str(max_rows)})
        answer = bounded(answer, max_rows)
        if (answer.get("meta") or {}).get("after"):  # another page exists
            answer = answer | {"note": cut_note(max_rows, None)}
        return answer

    @server.tool(annotations=READ_ONLY)
    async def aggregate(
        ctx: Context,
        site: Site,
        period: Period = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        filters: Filters = None,
        compare: Compare = None,
        source: Source = None,
    ) -> dict[str, Any]:
        """Top-line numbers for a range: pageviews, visitors, sessions, bounce_rate (0-1),
        avg_session_duration_s (GET /api/v1/stats/aggregate)."""
        params = range_params(site, period, date_from, date_to, filters, source, compare=compare)
        return await get(ctx, "/api/v1/stats/aggregate", params)

    @server.tool(annotations=READ_ONLY)
    async def timeseries(
        ctx: Context,
        site: Site,
        period: Period = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        interval: Annotated[
            Literal["minute", "hour", "day", "week", "month"] | None,
            Field(description="Bucket size; default chosen from the range's length."),
        ] = None,
        filters: Filters = None,
        source: Source = None,
    ) -> dict[str, Any]:
        """Pageviews and visitors per time bucket, empty buckets as zero (GET /api/v1/stats/timeseries)."""
        params = range_params(site, period, date_from, date_to, filters, source, interval=interval)
        return await get(ctx, "/api/v1/stats/timeseries", params)

    @server.tool(annotations=READ_ONLY)
    async def breakdown(
        ctx: Context,
        site: Site,
        by: Annotated[
            str,
            Field(
                description="A dimension (path, entry_path, exit_path, referrer_domain, channel, "
                "utm_source, country, browser, os, device, ...), event:name, or prop:KEY."
            ),
        ],
        period: Period = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        filters: Filters = None,
        goal: Annotated[str | None, Field(description="With by=prop:KEY: only this goal's events.")] = None,
        limit: Annotated[int | None, Field(ge=1, le=1000, description="Rows wanted (default 10).")] = None,
        source: Source = None,
    ) -> dict[str, Any]:
        """Pageviews and visitors per value of a dimension, most visitors first
        (GET /api/v1/stats/breakdown)."""
        wanted = min(limit or 10, max_rows)
        params = range_params(
            site, period, date_from, date_to, filters, source, by=by, goal=goal, limit=wanted
        )
        answer = await get(ctx, "/api/v1/stats/breakdown", params)
        if limit is not None and limit > max_rows and len(answer.get("results") or []) == max_rows:
            return answer | {"note": cut_note(max_rows, None)}  # there may be more
        return answer

    @server.tool(annotations=READ_ONLY)
    async def goals(
        ctx: Context,
        site: Site,
        period: Period = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        filters: Filters = None,
        source: Source = None,
    ) -> dict[str, Any]:
        """Each goal of the site: its conversions, converted visitors and conversion rate
        (GET /api/v1/stats/goals)."""
        return await get(
            ctx, "/api/v1/stats/goals", range_params(site, period, date_from, date_to, filters, source)
        )

    @server.tool(annotations=READ_ONLY)
    async def funnel(
        ctx: Context,
        site: Site,
        steps: Annotated[
            list[dict[str, str]] | None,
            Field(
                description='2 to 8 steps, each {"page": "/pricing"} (a path pattern) or {"event": "Signup"}.'
            ),
        ] = None,
        saved_funnel: Annotated[
            str | None, Field(description="A saved funnel's name, instead of steps.")
        ] = None,
        period: Period = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        filters: Filters = None,
        source: Source = None,
    ) -> dict[str, Any]:
        """How many visitors reach each step of a funnel within a session, and where they drop off
        (GET /api/v1/stats/funnel)."""
        params = range_params(
            site,
            period,
            date_from,
            date_to,
            filters,
            source,
            steps=json.dumps(steps) if steps is not None else None,
            funnel=saved_funnel,
        )
        return await get(ctx, "/api/v1/stats/funnel", params)

    @server.tool(annotations=READ_ONLY)
    async def realtime(
        ctx: Context,
        site: Site,
        breakdown: Annotated[
            Literal["pages", "sources", "countries"] | None,
            Field(description="Also the last 30 minutes by page, source or country."),
        ] = None,
    ) -> dict[str, Any]:
        """Visitors on the site now (the last 5 minutes), or the last 30 minutes broken down
        (GET /api/v1/stats/realtime)."""
        params = {"site": site} | ({"breakdown": breakdown, "limit": str(max_rows)} if breakdown else {})
        return await get(ctx, "/api/v1/stats/realtime", params)

    @server.tool(annotations=READ_ONLY)
    async def provenance(
        ctx: Context,
        site: Site,
        report: Annotated[
            Literal["aggregate", "timeseries", "breakdown", "goals"],
            Field(description="Which figure: the report it is on."),
        ] = "aggregate",
        by: Annotated[
            str | None, Field(description="The breakdown's dimension, with report=breakdown.")
        ] = None,
        period: Period = None,
        date_from: DateFrom = None,
        date_to: DateTo = None,
        filters: Filters = None,
        source: Source = None,
    ) -> dict[str, Any]:
        """Where a figure comes from: the figure and its `meta` (the source read, agg or raw; the
        log's offsets and watermark covered; late events; whether agg and raw agree; the
        definitions' version), as the dashboard's provenance line shows it."""
        if (by is not None) != (report == "breakdown"):
            raise ToolError("by: give it with report=breakdown, and only then")
        params = range_params(site, period, date_from, date_to, filters, source, by=by, meta="true")
        answer = await api.get(key_of(ctx), f"/api/v1/stats/{report}", params)
        if not isinstance(answer, dict) or "meta" not in answer:
            raise ToolError("the API answered without meta")
        figure = bounded(answer.get("results"), max_rows)
        return {"figure": figure.get("results", figure), "meta": answer["meta"]} | (
            {"note": figure["note"]} if "note" in figure else {}
        )

    @server.tool(annotations=READ_ONLY)
    async def plausible_query(
        ctx: Context,
        site_id: Annotated[str, Field(description="The site's domain.")],
        metrics: Annotated[
            list[str],
            Field(
                description="Plausible metrics: visitors, visits, pageviews, bounce_rate (0-100), "
                "visit_duration, events, conversion_rate, ..."
            ),
        ],
        date_range: Annotated[
            str | list[str],
            Field(
                description='"day", "7d", "30d", "month", "6mo", "12mo", "year", "all", or '
                '["2026-11-01", "2026-11-07"].'
            ),
        ],
        dimensions: Annotated[
            list[str] | None,
            Field(
                description='e.g. ["event:page"], ["visit:source", "visit:country"], ["time:day"], '
                '["event:goal"].'
            ),
        ] = None,
        filters: Annotated[
            list[Any] | None, Field(description='Plausible filters, e.g. [["is", "visit:country", ["DE"]]].')
        ] = None,
        order_by: Annotated[list[Any] | None, Field(description='e.g. [["visitors", "desc"]].')] = None,
        include: Annotated[dict[str, Any] | None, Field(description='e.g. {"imports": true}.')] = None,
    ) -> dict[str, Any]:
        """Plausible's Stats API v2 (POST /api/v2/query): several dimensions, filters, ordering, as
        Plausible answers them; percentages 0-100."""
        body: dict[str, Any] = {"site_id": site_id, "metrics": metrics, "date_range": date_range}
        optional = {"dimensions": dimensions, "filters": filters, "order_by": order_by, "include": include}
        body |= {name: value for name, value in optional.items() if value is not None}
        # One row more than shown: a cut answer is known as cut.
        body["pagination"] = {"limit": max_rows + 1, "offset": 0}
        answer = bounded(await api.post(key_of(ctx), "/api/v2/query", body), max_rows + 1)
        results = answer.get("results")
        if isinstance(results, list) and len(results) > max_rows:
            return answer | {"results": results[:max_rows], "note": cut_note(max_rows, None)}
        return answer

    @server.tool(annotations=READ_ONLY)
    async def sql(
        ctx: Context,
        sql: Annotated[
            str, Field(description="One SELECT over the raw archive, table events (see the events columns).")
        ],
        limit: Annotated[int | None, Field(ge=1, le=1000, description="Rows wanted.")] = None,
    ) -> dict[str, Any]:
        """Read-only SQL over the raw event archive: the operator's key only (a member's key is
        refused: the archive holds every site's rows). Only one SELECT of Tally's readable tables
        and listed functions; runs read-only, time- and memory-limited (POST /api/v1/query)."""
        wanted = min(limit or max_rows, max_rows)
        answer = bounded(await api.post(key_of(ctx), "/api/v1/query", {"sql": sql, "limit": wanted}), wanted)
        if answer.get("truncated"):
            answer = answer | {"note": cut_note(wanted, None)}
        return answer

    return server
