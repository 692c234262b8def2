"""A site's visitor identity (issue 35) without a store: the salt periods of each rotation, the
salt a visitor id takes (the site's rotation's; ip_hash always the day's), the retention report's
weeks, and what the report says about the identity its cohorts rest on."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from collector.enrichment import Draft, RequestContext, keyed_hash, put_visitor_identity
from collector.salts import salt_holding
from storage.queries.retention import Cohort, RetentionReport, in_force, report_weeks, spanned_change
from storage.site_identity import (
    ROTATIONS,
    IdentityChange,
    InvalidRotation,
    checked_rotation,
    next_period,
    period_start,
)

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/131.0.0.0 Safari/537.36"


@pytest.mark.parametrize(
    ("rotation", "day", "start", "following"),
    [
        ("daily", date(2026, 11, 29), date(2026, 11, 29), date(2026, 11, 30)),
        ("weekly", date(2026, 11, 29), date(2026, 11, 23), date(2026, 11, 30)),  # a Sunday: its Monday
        ("weekly", date(2026, 11, 23), date(2026, 11, 23), date(2026, 11, 30)),
        ("weekly", date(2027, 1, 1), date(2026, 12, 28), date(2027, 1, 4)),  # ISO week 53 of 2026
        ("monthly", date(2026, 12, 31), date(2026, 12, 1), date(2027, 1, 1)),
        ("monthly", date(2028, 2, 29), date(2028, 2, 1), date(2028, 3, 1)),
    ],
)
def test_each_rotation_has_one_period_per_day_week_or_month(
    rotation: str, day: date, start: date, following: date
) -> None:
    assert period_start(rotation, day) == start  # type: ignore[arg-type]
    assert next_period(rotation, start) == following  # type: ignore[arg-type]


def test_periods_tile_the_calendar_for_every_rotation() -> None:
    for rotation in ROTATIONS:
        day = date(2026, 1, 1)
        while day < date(2027, 1, 1):
            start = period_start(rotation, day)
            assert start <= day < next_period(rotation, start), (rotation, day)
            day += timedelta(days=1)


def test_a_rotation_is_checked_and_a_typo_named() -> None:
    assert checked_rotation(" Weekly ") == "weekly"
    with pytest.raises(InvalidRotation) as refused:
        checked_rotation("weakly")
    assert refused.value.field == "rotation"
    assert (
        str(refused.value)
        == "rotation: 'weakly' is not one of daily, weekly, monthly (how long a visitor id lives)"
    )


def visitor_id(salts_site: str, rotation_salts: dict, rotations: dict, moment: datetime) -> tuple[str, str]:
    """The visitor id and ip_hash one client gets from the collector's salts at `moment`."""
    salts = salt_holding(rotation_salts)
    salts._rotations = rotations
    draft = Draft(
        site=salts_site, name="pageview", url="https://x/", referrer="", props={}, screen_width=0, ts=moment
    )
    context = RequestContext(
        client_ip="81.2.69.142",
        user_agent=CHROME,
        received_at=moment,
        salt=salts.for_time(moment),
        visitor_salt=salts.for_visitor(salts_site, moment),
    )
    put_visitor_identity(draft, context)
    return str(draft.fields["visitor_id"]), str(draft.fields["ip_hash"])


def test_a_weekly_site_keeps_a_visitors_id_across_days_of_a_week_and_a_daily_one_does_not() -> None:
    tuesday, wednesday = datetime(2026, 11, 24, 10, tzinfo=UTC), datetime(2026, 11, 25, 9, tzinfo=UTC)
    next_monday = datetime(2026, 11, 30, 0, 0, 1, tzinfo=UTC)
    held = {
        ("daily", date(2026, 11, 24)): b"d1" * 16,
        ("daily", date(2026, 11, 25)): b"d2" * 16,
        ("daily", date(2026, 11, 30)): b"d3" * 16,
        ("weekly", date(2026, 11, 23)): b"w1" * 16,
        ("weekly", date(2026, 11, 30)): b"w2" * 16,
        ("monthly", date(2026, 11, 1)): b"m1" * 16,
    }
    weekly = {"weekly.example.com": "weekly"}
    same_week = [visitor_id("weekly.example.com", held, weekly, moment) for moment in (tuesday, wednesday)]
    assert same_week[0][0] == same_week[1][0]
    assert same_week[0][1] != same_week[1][1]  # ip_hash (rate limits) still takes the day's salt
    assert visitor_id("weekly.example.com", held, weekly, next_monday)[0] != same_week[0][0]
    daily = [visitor_id("daily.example.com", held, weekly, moment)[0] for moment in (tuesday, wednesday)]
    assert daily[0] != daily[1]
    assert daily[0] == keyed_hash(b"d1" * 16, "daily.example.com", "81.2.69.142", CHROME)  # as before
    monthly = {"monthly.example.com": "monthly"}
    assert len({visitor_id("monthly.example.com", held, monthly, m)[0] for m in (tuesday, wednesday)}) == 1


def test_the_report_weeks_end_with_the_week_holding_until() -> None:
    assert report_weeks(date(2026, 11, 29), 3) == (date(2026, 11, 9), date(2026, 11, 16), date(2026, 11, 23))
    assert report_weeks(date(2026, 11, 30), 1) == (date(2026, 11, 30),)


def test_a_cohort_spanning_an_identity_change_says_so() -> None:
    changed = datetime(2026, 11, 18, 12, tzinfo=UTC)
    history = [IdentityChange("daily", None), IdentityChange("weekly", changed)]
    start, end = datetime(2026, 11, 9, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)
    assert in_force(history, start, end) == tuple(history)
    assert in_force(history, datetime(2026, 11, 23, tzinfo=UTC), end) == (history[1],)
    note = spanned_change(history, start, end)
    assert note.startswith(
        "spans a change of visitor identity: daily ids, then weekly from 2026-11-18 12:00 UTC"
    )
    assert spanned_change(history, datetime(2026, 11, 23, tzinfo=UTC), end) == ""
    assert Cohort(date(2026, 11, 9), 4, (1, 0, 3)).shares == (0.25, 0.0, 0.75)
    assert Cohort(date(2026, 11, 9), 0, (0,)).shares == (0.0,)


def test_the_report_says_what_its_identities_let_it_see() -> None:
    daily = RetentionReport((), (), (IdentityChange("daily", None),))
    assert daily.identity_note.startswith(
        "visitor ids live one UTC day: nobody is recognised in a later week"
    )
    changed = RetentionReport(
        (), (), (IdentityChange("daily", None), IdentityChange("monthly", datetime(2026, 11, 3, tzinfo=UTC)))
    )
    assert (
        "; visitor ids live one calendar month (UTC): returns are recognised within a month"
        in changed.identity_note
    )


def test_stats_retention_site_is_stats_site_with_retention() -> None:
    from ops.cli.stats import stats

    asked = stats.make_context("stats", ["retention", "example.com", "--weeks", "4"])
    assert (asked.params["site"], asked.params["retention"], asked.params["weeks"]) == (
        "example.com",
        True,
        "4",
    )
    plain = stats.make_context("stats", ["retention"])  # a site named so, alone, stays a site
    assert (plain.params["site"], plain.params["retention"]) == ("retention", False)
