"""Imported history of a site outside UTC, as a user imports it (the real CLI, the real store)
and reads it back from Plausible's v2 query with `include.imports` (both stats sources).

Both exporters write per the site's / property's own calendar day, so an imported day is the
site's local day: here America/New_York, across the end of daylight-saving time (Sunday
2026-11-01 is 25 hours long there). The site's own events start on its local 2026-11-03 (at
22:00 EST, already the 4th in UTC), so the imported 2026-11-03 is never used: a day is counted
once, from the site's own events (Plausible trims an import the same way).
"""

from __future__ import annotations

import os
import zipfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient

from dashboard.app import build_app
from storage.client import connect
from storage.rollup_backfill import backfill_rollups
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.events import archive_rows, page_view

pytestmark = pytest.mark.integration

ZONE = "America/New_York"
PLAUSIBLE_SITE = "ny-plausible-imports.example.com"
GA4_SITE = "ny-ga4-imports.example.com"
NOW = datetime(2026, 11, 10, 17, tzinfo=UTC)
SOURCES = ["raw", "agg"]

# Per local day: visitors, page views, bounces, visits, visit duration (s). The 3rd overlaps
# the site's own events and is not used.
DAYS = {
    "2026-10-31": (10, 20, 5, 10, 100),
    "2026-11-01": (20, 40, 10, 20, 200),  # 25 hours in New York
    "2026-11-02": (30, 60, 15, 30, 300),
    "2026-11-03": (40, 80, 20, 40, 400),
}


def native_events(site: str) -> list:
    """One bounce at 22:00 EST on the 3rd (03:00 UTC on the 4th), one at 10:00 EST on the 4th."""
    return [
        page_view(site, "a", datetime(2026, 11, 4, 3, tzinfo=UTC), "/"),
        page_view(site, "b", datetime(2026, 11, 4, 15, tzinfo=UTC), "/pricing"),
    ]


def plausible_export(folder: Path) -> Path:
    path = folder / "plausible-ny.zip"
    totals = "".join(f"{day},{v},{pv},{b},{visits},{d}\n" for day, (v, pv, b, visits, d) in DAYS.items())
    pages = "".join(
        f"{day},{PLAUSIBLE_SITE},/,{visits},{v},{pv},,0\n" for day, (v, pv, _, visits, _) in DAYS.items()
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "imported_visitors_20261031_20261103.csv",
            "date,visitors,pageviews,bounces,visits,visit_duration\n" + totals,
        )
        archive.writestr(
            "imported_pages_20261031_20261103.csv",
            "date,hostname,page,visits,visitors,pageviews,scroll_depth,pageleave_visitors\n" + pages,
        )
    return path


def ga4_export(folder: Path) -> Path:
    """The same days as GA4's Data API writes them: YYYYMMDD, rates and averages per session."""
    path = folder / "ga4-ny.zip"

    def line(day: str, v: int, pv: int, b: int, visits: int, d: int, page: str = "") -> str:
        return f"{day.replace('-', '')},{page}{v},{visits},{pv},{b / visits},{d / visits}\n"

    metrics = "activeUsers,sessions,screenPageViews,bounceRate,averageSessionDuration"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "totals.csv", f"date,{metrics}\n" + "".join(line(day, *n) for day, n in DAYS.items())
        )
        archive.writestr(
            "pages.csv",
            f"# Pages and screens\n\ndate,pagePath,{metrics}\n"
            + "".join(line(day, *n, page="/,") for day, n in DAYS.items()),
        )
    return path


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    for site in (PLAUSIBLE_SITE, GA4_SITE):
        add_site(client, site, ZONE)
        rows, columns = archive_rows(native_events(site))
        client.insert("events", rows, column_names=columns)
        backfill_rollups(client, site, date(2026, 11, 3), date(2026, 11, 5))
    return client


@pytest.fixture(scope="module")
def imported(
    dashboard_settings: Settings, store: Client, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """What `tally import` printed, per site."""
    env = os.environ | dashboard_settings.environment()
    folder = tmp_path_factory.mktemp("ny-exports")
    printed = {}
    for site, origin, export in (
        (PLAUSIBLE_SITE, "plausible", plausible_export(folder)),
        (GA4_SITE, "ga4", ga4_export(folder)),
    ):
        answer = run_tally(env, "import", site, str(export), "--from", origin, timeout=120)
        assert answer.returncode == 0, answer.stderr
        printed[site] = answer.stdout
    return printed


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, imported: dict[str, str]) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: NOW).server.test_client()


def query(api: FlaskClient, settings: Settings, site: str, source: str, **body: Any) -> dict[str, Any]:
    response = api.post(
        "/api/v2/query",
        json={"site_id": site, "include": {"imports": True}, **body},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
        query_string={"source": source},
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def rows(answer: dict[str, Any]) -> list[list[Any]]:
    return [[*row["dimensions"], *row["metrics"]] for row in answer["results"]]


SITES = [PLAUSIBLE_SITE, GA4_SITE]


@pytest.mark.parametrize("site", SITES)
def test_import_says_which_days_the_sites_own_events_cover(imported: dict[str, str], site: str) -> None:
    assert "2026-10-31 to 2026-11-03" in imported[site]
    assert (
        "2026-11-03 to 2026-11-03 are not used: the site's own events start on 2026-11-03" in imported[site]
    )


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("site", SITES)
def test_imported_days_are_the_sites_local_days(
    api: FlaskClient, dashboard_settings: Settings, site: str, source: str
) -> None:
    days = query(api, dashboard_settings, site, source, metrics=["visitors", "pageviews", "visits"],
                 dimensions=["time:day"], date_range=["2026-10-31", "2026-11-04"])  # fmt: skip
    assert rows(days) == [
        ["2026-10-31", 10, 20, 10],
        ["2026-11-01", 20, 40, 20],  # the 25-hour day, whole
        ["2026-11-02", 30, 60, 30],
        ["2026-11-03", 1, 1, 1],  # the site's own event (22:00 EST), not the imported 40
        ["2026-11-04", 1, 1, 1],
    ]
    assert days["meta"]["imports_included"] is True
    totals = query(api, dashboard_settings, site, source, metrics=["visitors", "pageviews", "visits"],
                   date_range=["2026-10-31", "2026-11-04"])  # fmt: skip
    assert rows(totals) == [[62, 122, 62]]
    pages = query(api, dashboard_settings, site, source, metrics=["visitors", "pageviews"],
                  dimensions=["event:page"], date_range=["2026-10-31", "2026-11-04"])  # fmt: skip
    assert rows(pages) == [["/", 61, 121], ["/pricing", 1, 1]]
    weeks = query(api, dashboard_settings, site, source, metrics=["visitors"], dimensions=["time:week"],
                  date_range=["2026-10-26", "2026-11-08"])  # fmt: skip
    assert rows(weeks) == [["2026-10-26", 30], ["2026-11-02", 32]]  # weeks from local Mondays


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("site", SITES)
def test_a_range_cut_mid_day_uses_only_its_whole_local_days(
    api: FlaskClient, dashboard_settings: Settings, site: str, source: str
) -> None:
    dst_day = query(api, dashboard_settings, site, source, metrics=["visitors"],
                    date_range=["2026-11-01", "2026-11-01"])  # fmt: skip
    assert rows(dst_day) == [[20]]
    # From 00:30 on the 1st: the 1st is cut, so only the imported 2nd joins the native 3rd and 4th.
    cut = query(api, dashboard_settings, site, source, metrics=["visitors"],
                date_range=["2026-11-01T00:30:00", "2026-11-04T23:59:59"])  # fmt: skip
    assert rows(cut) == [[32]]
    within = query(api, dashboard_settings, site, source, metrics=["visitors"],
                   date_range=["2026-11-01T06:00:00", "2026-11-01T18:00:00"])  # fmt: skip
    assert rows(within) == [[0]]
    assert within["meta"]["imports_skip_reason"] == "no_imported_data"


@pytest.mark.parametrize("site", SITES)
def test_days_the_sites_own_events_cover_are_never_counted_twice(
    api: FlaskClient, dashboard_settings: Settings, site: str
) -> None:
    overlap = query(api, dashboard_settings, site, "raw", metrics=["visitors", "pageviews"],
                    date_range=["2026-11-03", "2026-11-03"])  # fmt: skip
    assert rows(overlap) == [[1, 1]]  # native only: the imported 40 visitors are not added
    assert overlap["meta"]["imports_skip_reason"] == "no_imported_data"


@pytest.mark.parametrize("site", SITES)
def test_all_time_starts_at_the_first_imported_day(
    api: FlaskClient, dashboard_settings: Settings, site: str
) -> None:
    """As Plausible's "all": with imports included, the range opens on the first imported day."""
    everything = query(api, dashboard_settings, site, "raw", metrics=["visitors"], date_range="all")
    assert rows(everything) == [[62]]
    native = query(api, dashboard_settings, site, "raw", metrics=["visitors"], date_range="all",
                   include={})  # fmt: skip
    assert rows(native) == [[2]]
