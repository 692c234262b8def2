"""Reading export files (storage/imports.py) and classing sources (storage/channels.py): pure
functions, no store."""

from __future__ import annotations

import io
import re
import zipfile
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from storage.channels import SEARCH_ENGINES, SOCIAL_NETWORKS, domain_pattern
from storage.imports import InvalidImport, Numbers, parse_csv, read_bytes, whole_days

DAY = date(2026, 10, 1)


def test_plausible_rows_are_summed_per_day_and_value() -> None:
    locations = (
        "date,country,region,city,visitors,visits,visit_duration,bounces,pageviews\n"
        "2026-10-01,de,DE-BE,1,6,7,300,2,18\n2026-10-01,DE,DE-HH,2,1,1,0,1,1\n"
    )
    parsed = parse_csv("imported_locations_20261001_20261001.csv", locations.encode(), "plausible")
    assert parsed is not None
    assert parsed.rows == {(DAY, "country", "DE"): Numbers(7, 19, 8, 3, 300)}


def test_plausible_sources_fill_each_utm_dimension() -> None:
    sources = (
        "date,source,referrer,utm_source,utm_medium,utm_campaign,utm_content,utm_term,pageviews,visitors,"
        "visits,visit_duration,bounces\n2026-10-01,Newsletter,,news,email,autumn,,,10,3,4,100,2\n"
    )
    parsed = parse_csv("sources_20261001_20261001.csv", sources.encode(), "plausible")
    assert parsed is not None
    assert {key[1:] for key in parsed.rows} == {
        ("referrer_domain", "Newsletter"), ("utm_source", "news"), ("utm_medium", "email"),
        ("utm_campaign", "autumn"),
    }  # fmt: skip


def test_same_bytes_same_id_inside_a_zip_or_alone() -> None:
    text = b"date,visitors,pageviews,bounces,visits,visit_duration\n2026-10-01,1,1,0,1,0\n"
    name = "imported_visitors_20261001_20261001.csv"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"export/{name}", text)
    zipped = read_bytes("export.zip", buffer.getvalue(), "plausible")
    alone = read_bytes(name, text, "plausible")
    assert [f.import_id for f in zipped] == [f.import_id for f in alone]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("date,activeUsers,sessions,bounceRate\n20261001,1,1,1.5\n", "row 2, column 'bounceRate'"),
        ("date,pagePath,landingPage,activeUsers,sessions\n", "one dimension per file"),
        ("# GA4\ndate,country,activeUsers,sessions\n", "row 2, column 'country'"),
        ("date,activeUsers,sessions\n2026-13-01,1,1\n", "row 2, column 'date'"),
        ("date,activeUsers,sessions\n20261001,1,-1\n", "row 2, column 'sessions': '-1' is negative"),
    ],
)
def test_ga4_mistakes_name_row_and_column(text: str, named: str) -> None:
    with pytest.raises(InvalidImport, match=re.escape(named)):
        parse_csv("ga4.csv", text.encode(), "ga4")


def test_only_whole_days_of_a_range_take_imported_numbers() -> None:
    utc = ZoneInfo("UTC")
    assert whole_days(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 3, tzinfo=UTC), utc) == (
        date(2026, 10, 1), date(2026, 10, 2),
    )  # fmt: skip
    assert whole_days(datetime(2026, 10, 1, 6, tzinfo=UTC), datetime(2026, 10, 2, 6, tzinfo=UTC), utc) is None


def test_whole_days_are_the_sites_local_days_across_a_clock_change() -> None:
    """New York's 2026-11-01 runs from 04:00 UTC to 05:00 UTC the next day (25 hours)."""
    new_york = ZoneInfo("America/New_York")
    start, end = datetime(2026, 11, 1, 4, tzinfo=UTC), datetime(2026, 11, 2, 5, tzinfo=UTC)
    assert whole_days(start, end, new_york) == (date(2026, 11, 1), date(2026, 11, 1))
    assert whole_days(start, end - timedelta(hours=1), new_york) is None  # 24 h: not the whole day
    assert whole_days(start + timedelta(minutes=30), end + timedelta(days=1), new_york) == (
        date(2026, 11, 2), date(2026, 11, 2),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("source", "search", "social"),
    [
        ("www.google.co.uk", True, False),
        ("google", True, False),
        ("search.brave.com", True, False),
        ("l.facebook.com", False, True),
        ("news.ycombinator.com", False, True),
        ("t.co", False, True),
        ("x.com", False, True),
        ("box.com", False, False),
        ("x.example.com", False, False),
        ("googleblog.example.org", False, False),
    ],
)
def test_search_and_social_sources(source: str, search: bool, social: bool) -> None:
    # RE2 and Python's re read these patterns alike (no look-arounds, no back-references).
    assert bool(re.match(domain_pattern(SEARCH_ENGINES), source)) is search
    assert bool(re.match(domain_pattern(SOCIAL_NETWORKS), source)) is social


def test_a_file_past_the_row_cap_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("storage.imports.MAX_ROWS_PER_FILE", 2)
    text = "date,activeUsers,sessions\n" + "20261001,1,1\n" * 3
    with pytest.raises(
        InvalidImport, match=re.escape("ga4.csv: more than 2 rows; split the export by period")
    ):
        parse_csv("ga4.csv", text.encode(), "ga4")


def test_the_header_is_checked_before_any_row_is_read() -> None:
    """A wrong header is refused at once, whatever follows (here a row that is no CSV)."""
    text = 'date,visitors\n"unterminated\n' + "x" * 100
    with pytest.raises(InvalidImport, match=re.escape("no column 'page'")):
        parse_csv("imported_pages_20261001_20261001.csv", text.encode(), "plausible")
