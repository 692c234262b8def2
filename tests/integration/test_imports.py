"""`tally import SITE FILE --from plausible|ga4` as a user runs it (the real CLI, the real store),
and the imported history in Plausible's v2 answers with `include.imports` (both sources).

The files are written here in the exporters' formats: Plausible's CSV export (a zip of
`imported_<table>_<first>_<last>.csv`, the columns of plausible/analytics'
lib/plausible/imported/csv_importer.ex) and a GA4 Data API export (`date` as YYYYMMDD,
`pagePath`, `activeUsers`, `sessions`, `screenPageViews`, `bounceRate`, `averageSessionDuration`,
with the `#` comment lines GA4's download starts with).
"""

from __future__ import annotations

import os
import zipfile
from datetime import UTC, datetime, timedelta
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
from tests.integration.test_cli_errors import one_line_error

pytestmark = pytest.mark.integration

SITE = "imports.example.com"
GA_SITE = "ga4-imports.example.com"
DAY = datetime(2026, 11, 10, tzinfo=UTC)
RANGE = ["2026-10-01", "2026-11-10"]
SOURCES = ["raw", "agg"]

# Native: one 2-page visit of 60 s from google.com (CH, Firefox), one bounce (DE) on /pricing.
EVENTS = [
    page_view(SITE, "a", DAY + timedelta(hours=9), "/", referrer_domain="google.com", country="CH",
              browser="Firefox", screen_width=1440),
    page_view(SITE, "a", DAY + timedelta(hours=9, minutes=1), "/pricing", referrer_domain="google.com",
              country="CH", browser="Firefox", screen_width=1440),
    page_view(SITE, "b", DAY + timedelta(hours=10), "/pricing", country="DE", browser="Chrome",
              screen_width=1440),
]  # fmt: skip

PLAUSIBLE_FILES = {
    "imported_visitors_20261001_20261002.csv": (
        "date,visitors,pageviews,bounces,visits,visit_duration\n"
        "2026-10-01,10,30,4,12,600\n"
        "2026-10-02,5,8,2,6,120\n"
    ),
    "imported_pages_20261001_20261002.csv": (
        "date,hostname,page,visits,visitors,pageviews,scroll_depth,pageleave_visitors\n"
        "2026-10-01,imports.example.com,/,10,8,20,,0\n"
        "2026-10-01,imports.example.com,/old,3,2,10,,0\n"
        "2026-10-02,imports.example.com,/,6,5,8,,0\n"
    ),
    "imported_sources_20261001_20261002.csv": (
        "date,source,referrer,utm_source,utm_medium,utm_campaign,utm_content,utm_term,pageviews,visitors,"
        "visits,visit_duration,bounces\n"
        "2026-10-01,google.com,,,,,,,20,7,8,500,2\n"
        "2026-10-01,Newsletter,,newsletter,email,autumn,,,10,3,4,100,2\n"
        "2026-10-02,google.com,,,,,,,8,5,6,120,2\n"
    ),
    "imported_locations_20261001_20261002.csv": (
        "date,country,region,city,visitors,visits,visit_duration,bounces,pageviews\n"
        "2026-10-01,DE,DE-BE,2950159,6,7,300,2,18\n"
        "2026-10-01,DE,DE-HH,2911298,1,1,0,1,1\n"
        "2026-10-01,FR,,0,3,4,300,1,11\n"
        "2026-10-02,DE,,0,5,6,120,2,8\n"
    ),
    "imported_custom_events_20261001_20261002.csv": "date,name,link_url,path,visitors,events\n",
}

GA4_PAGES = (
    "# ----------------------------------------\n"
    "# Pages and screens\n"
    "# ----------------------------------------\n"
    "\n"
    "date,pagePath,activeUsers,sessions,screenPageViews,bounceRate,averageSessionDuration\n"
    "20261003,/,4,5,9,0.4,30\n"
    "20261003,/docs,2,2,3,0,90\n"
)
GA4_TOTALS = (
    "date,activeUsers,sessions,screenPageViews,bounceRate,averageSessionDuration\n"
    "20261003,6,7,12,0.2857142857,47.14\n"
)


@pytest.fixture(scope="module")
def store(dashboard_settings: Settings) -> Client:
    client = connect(dashboard_settings)
    rows, columns = archive_rows(EVENTS)
    client.insert("events", rows, column_names=columns)
    add_site(client, SITE)
    add_site(client, GA_SITE)
    backfill_rollups(client, SITE, (DAY - timedelta(days=1)).date(), (DAY + timedelta(days=2)).date())
    return client


@pytest.fixture(scope="module")
def env(dashboard_settings: Settings, store: Client) -> dict[str, str]:
    return os.environ | dashboard_settings.environment()


@pytest.fixture(scope="module")
def export_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plausible-export")
    path = folder / "plausible-export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in PLAUSIBLE_FILES.items():
            archive.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def imported(env: dict[str, str], export_zip: Path) -> str:
    answer = run_tally(env, "import", SITE, str(export_zip), "--from", "plausible", timeout=120)
    assert answer.returncode == 0, answer.stderr
    return answer.stdout


@pytest.fixture(scope="module")
def api(dashboard_settings: Settings, store: Client) -> FlaskClient:
    return build_app(dashboard_settings, clock=lambda: DAY + timedelta(hours=12)).server.test_client()


def query(
    api: FlaskClient, settings: Settings, source: str = "raw", site: str = SITE, **body: Any
) -> dict[str, Any]:
    response = api.post(
        "/api/v2/query",
        json={"site_id": site, "date_range": RANGE, **body},
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
        query_string={"source": source},
    )
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def rows(answer: dict[str, Any]) -> list[list[Any]]:
    return [[*row["dimensions"], *row["metrics"]] for row in answer["results"]]


VISIT_METRICS = ["visitors", "visits", "pageviews", "bounce_rate", "visit_duration"]


def test_import_reports_what_it_wrote(imported: str) -> None:
    assert f"imported 4 file(s) into {SITE}: 2026-10-01 to 2026-10-02" in imported


@pytest.mark.parametrize("source", SOURCES)
def test_aggregate_adds_the_imported_days(
    api: FlaskClient, dashboard_settings: Settings, imported: str, source: str
) -> None:
    native = query(api, dashboard_settings, source, metrics=VISIT_METRICS)
    assert rows(native) == [[2, 2, 3, 50, 30]]
    assert "imports_included" not in native["meta"]
    answer = query(api, dashboard_settings, source, metrics=VISIT_METRICS, include={"imports": True})
    # visitors 2 + 15, visits 2 + 18, page views 3 + 38, bounces 1 + 6 of 20 visits (35 %),
    # duration (60 + 0 + 720) s over 20 visits (39 s)
    assert rows(answer) == [[17, 20, 41, 35, 39]]
    assert answer["meta"]["imports_included"] is True


@pytest.mark.parametrize("source", SOURCES)
def test_breakdowns_and_days_add_the_imported_rows(
    api: FlaskClient, dashboard_settings: Settings, imported: str, source: str
) -> None:
    include = {"imports": True}
    pages = query(api, dashboard_settings, source, metrics=["visitors", "pageviews"],
                  dimensions=["event:page"], include=include)  # fmt: skip
    assert rows(pages) == [["/", 14, 29], ["/old", 2, 10], ["/pricing", 2, 2]]
    sources = query(api, dashboard_settings, source, metrics=["visitors", "visits"],
                    dimensions=["visit:source"], include=include)  # fmt: skip
    assert rows(sources) == [["google.com", 13, 15], ["Newsletter", 3, 4], ["Direct / None", 1, 1]]
    media = query(api, dashboard_settings, source, metrics=["visitors", "visits"],
                  dimensions=["visit:utm_medium"], include=include)  # fmt: skip
    assert rows(media) == [["email", 3, 4], ["(not set)", 2, 2]]  # Plausible's names of the blanks
    countries = query(api, dashboard_settings, source, metrics=["visitors"],
                      dimensions=["visit:country"], include=include)  # fmt: skip
    assert rows(countries) == [["DE", 13], ["FR", 3], ["CH", 1]]
    days = query(api, dashboard_settings, source, metrics=["visitors", "pageviews", "bounce_rate"],
                 dimensions=["time:day"], include=include)  # fmt: skip
    assert rows(days) == [["2026-10-01", 10, 30, 33], ["2026-10-02", 5, 8, 33], ["2026-11-10", 2, 3, 50]]


def test_v1_with_imported(api: FlaskClient, dashboard_settings: Settings, imported: str) -> None:
    """Plausible's v1 `with_imported=true` on Tally's v1 paths (called with site_id)."""
    response = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site_id": SITE, "period": "custom", "date": "2026-10-01,2026-11-10",
                      "metrics": "visitors,pageviews", "with_imported": "true", "source": "raw"},
        headers={"Authorization": f"Bearer {dashboard_settings.resolved_api_key()}"},
    )  # fmt: skip
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["results"] == {"visitors": {"value": 17}, "pageviews": {"value": 41}}


def test_same_file_twice_changes_nothing(
    api: FlaskClient, dashboard_settings: Settings, env: dict[str, str], export_zip: Path, imported: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    before = rows(query(api, dashboard_settings, metrics=VISIT_METRICS, include={"imports": True}))
    again = run_tally(env, "import", SITE, str(export_zip), "--from", "plausible", timeout=120)
    assert again.returncode == 0, again.stderr
    assert "already imported" in again.stdout and "imported 0" not in again.stdout
    single = tmp_path / "imported_visitors_20261001_20261002.csv"  # one file of the zip, alone
    single.write_text(PLAUSIBLE_FILES[single.name])
    alone = run_tally(env, "import", SITE, str(single), "--from", "plausible", timeout=120)
    assert "already imported" in alone.stdout, alone.stderr
    assert rows(query(api, dashboard_settings, metrics=VISIT_METRICS, include={"imports": True})) == before


def test_ga4_export(
    api: FlaskClient, dashboard_settings: Settings, env: dict[str, str], tmp_path: Path, store: Client
) -> None:
    export = tmp_path / "ga4.zip"
    with zipfile.ZipFile(export, "w") as archive:
        archive.writestr("pages.csv", GA4_PAGES)
        archive.writestr("totals.csv", GA4_TOTALS)
    answer = run_tally(env, "import", GA_SITE, str(export), "--from", "ga4", timeout=120)
    assert answer.returncode == 0, answer.stderr
    totals = query(api, dashboard_settings, site=GA_SITE, metrics=VISIT_METRICS, include={"imports": True})
    # 7 sessions, 28.57 % of them bounces (2), 47.14 s on average (330 s in all)
    assert rows(totals) == [[6, 7, 12, 29, 47]]
    pages = query(api, dashboard_settings, site=GA_SITE, metrics=["visitors", "pageviews"],
                  dimensions=["event:page"], include={"imports": True})  # fmt: skip
    assert rows(pages) == [["/", 4, 9], ["/docs", 2, 3]]


def test_queries_imports_cannot_join_say_why(
    api: FlaskClient, dashboard_settings: Settings, imported: str
) -> None:
    filtered = query(api, dashboard_settings, metrics=["visitors"], include={"imports": True},
                     filters=[["is", "visit:country", ["DE"]]])  # fmt: skip
    assert rows(filtered) == [[1]]
    assert (
        filtered["meta"].items()
        >= {"imports_included": False, "imports_skip_reason": "unsupported_query"}.items()
    )
    hours = query(api, dashboard_settings, metrics=["visitors"], dimensions=["time:hour"],
                  include={"imports": True}, date_range=["2026-11-10", "2026-11-10"])  # fmt: skip
    assert hours["meta"]["imports_skip_reason"] == "unsupported_interval"
    nothing = query(api, dashboard_settings, metrics=["visitors"], include={"imports": True},
                    date_range=["2026-11-10", "2026-11-10"])  # fmt: skip
    assert nothing["meta"]["imports_skip_reason"] == "no_imported_data"


@pytest.mark.parametrize(
    ("name", "text", "named"),
    [
        (
            "imported_visitors_20261001_20261002.csv",
            "date,visitors,pageviews,bounces,visits,visit_duration\n2026-10-05,1,1,0,1,0\n2026-10-06,x,1,0,1,0\n",
            "imported_visitors_20261001_20261002.csv: row 3, column 'visitors': 'x' is not a number",
        ),
        (
            "imported_pages_20261001_20261002.csv",
            "date,hostname,visitors,pageviews\n2026-10-05,h,1,1\n",
            "imported_pages_20261001_20261002.csv: row 1: no column 'page'",
        ),
        (
            "imported_visitors_20261001_20261002.csv",
            "date,visitors,pageviews,bounces,visits,visit_duration\n05/10/2026,1,1,0,1,0\n",
            "row 2, column 'date': '05/10/2026' is not a date",
        ),
        ("export.csv", "date,visitors\n", "export.csv: not a file of Plausible's CSV export"),
    ],
)
def test_malformed_file_gets_one_line_naming_row_and_column(
    env: dict[str, str], tmp_path: Path, name: str, text: str, named: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert named in one_line_error(
        run_tally(env, "import", SITE, str(path), "--from", "plausible", timeout=120)
    )


def test_unregistered_site_gets_one_line(env: dict[str, str], export_zip: Path) -> None:
    answer = run_tally(
        env, "import", "nowhere.example.com", str(export_zip), "--from", "plausible", timeout=120
    )
    assert "nowhere.example.com is not registered" in one_line_error(answer)


def test_malformed_rows_write_nothing(api: FlaskClient, dashboard_settings: Settings, imported: str) -> None:
    """The malformed files above (days 2026-10-05/06) left nothing behind."""
    answer = query(api, dashboard_settings, metrics=["visitors"], include={"imports": True},
                   date_range=["2026-10-05", "2026-10-06"])  # fmt: skip
    assert answer["meta"]["imports_skip_reason"] == "no_imported_data"


def test_list_shows_the_imported_files_and_where_native_data_starts(
    env: dict[str, str], imported: str
) -> None:
    listed = run_tally(env, "import", SITE, "--list", timeout=120)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(
        line.startswith("imported_visitors_20261001_20261002.csv\tplausible\t2026-10-01\t2026-10-02\t2\t")
        for line in lines
    ), lines
    assert len([line for line in lines if "\tplausible\t" in line]) == 4
    assert lines[-1] == "the site's own events start on 2026-11-10: imported days from then on are not used"
    assert "tally import SITE FILE --from" in one_line_error(run_tally(env, "import", SITE, timeout=120))


def test_remove_takes_one_file_out_and_a_typo_gets_one_line(
    api: FlaskClient, dashboard_settings: Settings, env: dict[str, str], export_zip: Path, store: Client
) -> None:
    site = "imports-removed.example.com"
    add_site(store, site)
    assert run_tally(env, "import", site, str(export_zip), "--from", "plausible", timeout=120).returncode == 0
    totals = {"metrics": ["visitors"], "include": {"imports": True}}
    assert rows(query(api, dashboard_settings, site=site, **totals)) == [[15]]

    typo = run_tally(env, "import", site, "--remove", "imported_visitor.csv", timeout=120)
    assert f"{site} has no imported file 'imported_visitor.csv'" in one_line_error(typo)
    removed = run_tally(
        env, "import", site, "--remove", "imported_visitors_20261001_20261002.csv", timeout=120
    )
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith(
        f"removed imported_visitors_20261001_20261002.csv (2026-10-01 to 2026-10-02) from {site}"
    )
    assert rows(query(api, dashboard_settings, site=site, **totals)) == [
        [0]
    ]  # the day totals were that file's
    listed = run_tally(env, "import", site, "--list", timeout=120).stdout
    assert "imported_visitors_" not in listed and listed.count("\tplausible\t") == 3
