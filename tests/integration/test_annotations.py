"""Annotations (issue 35) through the API, the CLI and the store, on the real dashboard app and
the real ClickHouse engine: a note added, listed in its range, removed; a deploy from a CI
pipeline; Tally's own for a goal changed, a file imported (on the days it covers, once however
often it is imported) and an alert fired; the email report
listing them; and each refusal as a caller sees it (a viewer's key, a read-only key, another
site's key, a bad date, an empty or too long text), in one line from the CLI."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta

import pytest
from flask.testing import FlaskClient

from dashboard import email_reports
from dashboard.overview import LIVE_CHART, LiveChartNotes
from storage import alert_rules, annotations, definitions, goals, imports
from storage.client import connect
from storage.report_subscriptions import ReportPeriod
from storage.sites import add_site
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.integration.test_cli_errors import one_line_error
from tests.integration.test_manage_api import Team, api, refused, team  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration

MARKUP = "<b>Launch</b> & the <script>x</script> page"


def test_an_admin_adds_notes_members_read_them_and_an_admin_removes_one(
    api: FlaskClient,  # noqa: F811
    team: Team,  # noqa: F811
) -> None:
    url = "/api/v1/annotations"
    note = api.post(
        f"{url}?site={team.site}", json={"date": "2026-03-10", "text": MARKUP}, headers=team.manage["admin"]
    )
    assert note.status_code == 201, note.get_json()
    # A CI pipeline's deploy: the site in the body, an instant in UTC.
    deploy = api.post(
        url,
        json={
            "site": team.site,
            "datetime": "2026-03-11T14:05:00+01:00",
            "text": "v2.3 out",
            "kind": "deploy",
        },
        headers=team.manage["admin"],
    )
    assert deploy.status_code == 201, deploy.get_json()
    assert deploy.get_json()["datetime"] == "2026-03-11T13:05:00Z"

    # A viewer's read key lists them in the range, the text as written (data, never markup).
    listed = api.get(url, query_string={"site": team.site, "from": "2026-03-01", "to": "2026-04-01"},
                     headers=team.read["viewer"])  # fmt: skip
    assert listed.status_code == 200, listed.get_json()
    shown = [(a["date"], a["text"], a["kind"], a["author"]) for a in listed.get_json()["annotations"]]
    admin = team.emails["admin"]
    assert shown == [("2026-03-10", MARKUP, "note", admin), (None, "v2.3 out", "deploy", admin)]
    one_day = api.get(
        url, query_string={"site": team.site, "date": "2026-03-11"}, headers=team.read["viewer"]
    )
    assert [a["text"] for a in one_day.get_json()["annotations"]] == ["v2.3 out"]

    note_id = note.get_json()["id"]
    removed = api.delete(f"{url}/{note_id}", query_string={"site": team.site}, headers=team.manage["admin"])
    assert removed.status_code == 200, removed.get_json()
    again = api.get(url, query_string={"site": team.site, "from": "2026-03-01", "to": "2026-04-01"},
                    headers=team.operator)  # fmt: skip
    assert [a["text"] for a in again.get_json()["annotations"]] == ["v2.3 out"]
    refused(api.delete(f"{url}/{note_id}", query_string={"site": team.site}, headers=team.manage["admin"]),
            404, "id")  # fmt: skip
    # Audited as the other settings changes.
    audit = api.get("/api/v1/audit", query_string={"site": team.site}, headers=team.manage["owner"])
    actions = [entry["action"] for entry in audit.get_json()["entries"]]
    assert actions.count("annotation_added") == 2 and "annotation_removed" in actions


def test_refusals_name_the_field(api: FlaskClient, team: Team) -> None:  # noqa: F811
    url = f"/api/v1/annotations?site={team.site}"
    ok = {"date": "2026-03-10", "text": "a note"}
    refused(api.post(url, json=ok, headers=team.manage["viewer"]), 403, "site")
    refused(api.post(url, json=ok, headers=team.read["admin"]), 403)  # read-only key
    other = f"/api/v1/annotations?site={team.other_site}"
    refused(api.post(other, json=ok, headers=team.manage["admin"]), 403, "site")  # another site's key
    refused(api.get(other, headers=team.read["admin"]), 403, "site")
    admin = team.manage["admin"]
    refused(api.post(url, json={"date": "10/03/2026", "text": "x"}, headers=admin), 400, "date")
    refused(api.post(url, json={"datetime": "yesterday", "text": "x"}, headers=admin), 400, "datetime")
    refused(api.post(url, json={"text": "x"}, headers=admin), 400, "date")
    refused(api.post(url, json={"date": "2026-03-10", "text": "  "}, headers=admin), 400, "text")
    refused(api.post(url, json={"date": "2026-03-10", "text": "x" * 501}, headers=admin), 400, "text")
    refused(api.post(url, json={**ok, "kind": "alert"}, headers=admin), 400, "kind")
    refused(api.post(url, json={**ok, "colour": "red"}, headers=admin), 400, "colour")
    refused(api.get(f"{url}&date=2026-13-01", headers=admin), 400, "date")
    refused(
        api.post("/api/v1/annotations?site=never.example.com", json=ok, headers=team.operator), 404, "site"
    )
    refused(api.delete(f"/api/v1/annotations/definitions-2-1?site={team.site}", headers=admin), 400, "id")


def test_tallys_own_annotations_a_goal_change_an_import_an_alert_for_their_site_only(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    # A database of its own: definitions versions are global to one, and version 1 made in the
    # shared store would hold every later test's definitions (its engaged time, its session gap).
    settings = own_database_settings(
        tmp_path_factory.mktemp("annotations-home"), clickhouse_endpoint, "annotations"
    )
    client = connect(settings)
    site, other_site = "own.annotations.example.com", "other.annotations.example.com"
    for domain in (site, other_site):
        add_site(client, domain)
    definitions.current(client, settings)  # version 1 exists before the change
    before = datetime.now(UTC) - timedelta(minutes=1)
    goals.add_goal(client, goals.make_goal(site, "Signup"))
    csv = b"date,visitors,pageviews,bounces,visits,visit_duration\n2026-10-01,10,30,4,12,600\n"
    files = imports.read_bytes("imported_visitors_20261001_20261001.csv", csv, "plausible")
    imports.import_files(client, site, files, "plausible")
    fired = [
        "alert-" + site,
        "rule-1",
        site,
        "pageviews_above",
        before,
        120.0,
        100.0,
        before,
        "page views 120 above 100 in 5 minutes",
        "fired",
        0,
        "",
        0,
    ]  # as the alerts query writes it
    client.insert("alerts", [fired], column_names=[*alert_rules.ALERT_COLUMNS, "stage"])  # fmt: skip

    after = datetime.now(UTC) + timedelta(minutes=1)
    mine = annotations.list_annotations(client, site, before, after)
    automatic = {a.kind: a.text for a in mine if a.automatic}
    assert f"goals on {site}: +Signup" in automatic["definitions"], automatic
    assert "import" not in automatic  # marked on the day it covers, not when it was imported
    october = annotations.list_annotations(client, site, *annotations.day_range(date(2026, 10, 1), "UTC"))
    assert [a.text for a in october] == ["Imported imported_visitors_20261001_20261001.csv (plausible, "
                                         "2026-10-01 to 2026-10-01, 1 rows)"]  # fmt: skip
    assert automatic["alert"] == "Alert: page views 120 above 100 in 5 minutes"
    assert annotations.list_annotations(client, other_site, before, after) == []

    # The email report lists the period's annotations under the numbers, text escaped in HTML.
    today = datetime.now(UTC).date()
    annotations.add(client, site, today, MARKUP, "owner@example.com")
    yesterday = today - timedelta(days=1)
    period = ReportPeriod("weekly", today, today, yesterday, yesterday, "UTC")
    report = email_reports.build_report(client, site, period, "raw", settings)
    assert f"(note): {MARKUP}" in email_reports.text_part(report)
    assert "&lt;b&gt;Launch&lt;/b&gt;" in email_reports.html_part(report, "<chart@tally>")


def test_the_cli_adds_lists_and_removes_and_refuses_in_one_line(dashboard_settings: Settings) -> None:
    site = "cli.annotations.example.com"
    add_site(connect(dashboard_settings), site)
    env = os.environ | dashboard_settings.environment()
    added = run_tally(env, "annotations", "add", site, "Spring campaign", "--date", "2026-04-01", timeout=120)
    assert added.returncode == 0, added.stderr
    note_id = added.stdout.split()[2]
    listed = run_tally(env, "annotations", "list", site, "--from", "2026-03-30", "--to", "2026-04-02")
    assert listed.stdout.splitlines() == [
        f"{note_id}\t2026-04-01\tnote\t{dashboard_settings.owner_email}\tSpring campaign"
    ]
    assert run_tally(env, "annotations", "remove", site, note_id).returncode == 0
    assert "not registered" in one_line_error(run_tally(env, "annotations", "add", "nope.example.com", "x"))
    assert "--date" in one_line_error(run_tally(env, "annotations", "add", site, "x", "--date", "1 April"))


def test_an_import_is_marked_where_its_history_begins_and_ends_once_however_often_it_lands(
    dashboard_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    site = "imported.annotations.example.com"
    client = connect(dashboard_settings)
    add_site(client, site)
    folder = tmp_path_factory.mktemp("annotated-imports")
    header = "date,visitors,pageviews,bounces,visits,visit_duration\n"
    week = folder / "imported_visitors_20260905_20260911.csv"
    week.write_text(f"{header}2026-09-05,10,30,4,12,600\n2026-09-11,8,20,3,9,400\n")
    day = folder / "imported_visitors_20261001_20261001.csv"
    day.write_text(f"{header}2026-10-01,10,30,4,12,600\n")
    env = os.environ | dashboard_settings.environment()
    for path in (week, day, week):  # the week again: the same file, already imported
        landed = run_tally(env, "import", site, str(path), "--from", "plausible", timeout=120)
        assert landed.returncode == 0, landed.stderr

    listed = run_tally(env, "annotations", "list", site, "--from", "2026-09-01", "--to", "2026-10-31")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t")[1:] for line in listed.stdout.splitlines()]
    about = "(plausible, 2026-09-05 to 2026-09-11, 2 rows)"
    one_day = "(plausible, 2026-10-01 to 2026-10-01, 1 rows)"
    assert rows == [
        ["2026-09-05", "import", "tally", f"Imported {week.name} {about}: its first day"],
        ["2026-09-11", "import", "tally", f"Imported {week.name} {about}: its last day"],
        ["2026-10-01", "import", "tally", f"Imported {day.name} {one_day}"],
    ]
    # A range holding only the week's last day shows that end alone.
    inside = annotations.list_annotations(client, site, *annotations.day_range(date(2026, 9, 11), "UTC"))
    assert [(a.day, a.id.endswith("-last")) for a in inside] == [(date(2026, 9, 11), True)]
    # An import taken out of the history takes its markers with it.
    taken = run_tally(env, "import", site, "--remove", week.name)
    assert taken.returncode == 0, taken.stderr
    after = run_tally(env, "annotations", "list", site, "--from", "2026-09-01", "--to", "2026-10-31")
    assert [line.split("\t")[1] for line in after.stdout.splitlines()] == ["2026-10-01"]


def test_a_site_keeps_500_notes_the_next_is_refused_from_the_api_and_the_cli(
    api: FlaskClient,  # noqa: F811
    team: Team,  # noqa: F811
    dashboard_settings: Settings,
) -> None:
    client = connect(dashboard_settings)
    full = annotations.MAX_NOTES
    client.insert(  # 499 notes, as the store writes them
        annotations.TABLE,
        [[team.site, f"filled{n:06d}", 1, date(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC), f"note {n}",
          "owner@example.com", "note", 0] for n in range(full - 1)],
        column_names=["site", "id", "whole_day", "day", "at", "text", "author", "kind", "removed"],
    )  # fmt: skip
    url, admin = f"/api/v1/annotations?site={team.site}", team.manage["admin"]
    last = api.post(url, json={"date": "2026-03-10", "text": "the 500th"}, headers=admin)
    assert last.status_code == 201, last.get_json()
    over = api.post(url, json={"date": "2026-03-11", "text": "one too many"}, headers=admin)
    refused(over, 400, "site")
    assert over.get_json()["error"] == (
        f"site: {team.site} has {full} notes already, the most a site keeps; remove one first"
    )
    env = os.environ | dashboard_settings.environment()
    line = one_line_error(run_tally(env, "annotations", "add", team.site, "again", "--date", "2026-03-12"))
    assert f"{full} notes already" in line, line
    assert len(annotations.list_notes(client, team.site)) == full
    # Removing one makes room again.
    removed = api.delete(f"/api/v1/annotations/filled000000?site={team.site}", headers=admin)
    assert removed.status_code == 200, removed.get_json()
    again = api.post(url, json={"date": "2026-03-11", "text": "one too many, now fits"}, headers=admin)
    assert again.status_code == 201, again.get_json()


def test_a_site_shows_its_500_newest_automatic_annotations_the_oldest_dropped(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint
) -> None:
    # A database of its own: every definitions switch of a shared one would count for this site.
    settings = own_database_settings(tmp_path_factory.mktemp("annotations-cap"), clickhouse_endpoint, "cap")
    client = connect(settings)
    site = "cap.annotations.example.com"
    add_site(client, site)
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    fired = [
        [f"alert-cap-{n:04d}", "rule-1", site, "pageviews_above", first + timedelta(minutes=n), 120.0, 100.0,
         first + timedelta(minutes=n), f"alert number {n}", "fired", 0, "", 0]
        for n in range(annotations.MAX_AUTOMATIC + 1)
    ]  # fmt: skip
    client.insert("alerts", fired, column_names=[*alert_rules.ALERT_COLUMNS, "stage"])

    env = os.environ | settings.environment()
    listed = run_tally(env, "annotations", "list", site, timeout=120)  # the last 30 days
    assert listed.returncode == 0, listed.stderr
    texts = [line.split("\t")[4] for line in listed.stdout.splitlines()]
    assert len(texts) == annotations.MAX_AUTOMATIC
    newest = annotations.MAX_AUTOMATIC
    assert (texts[0], texts[-1]) == ("Alert: alert number 1", f"Alert: alert number {newest}")
    # The dropped one is in no range any more; a note is never dropped for Tally's own.
    annotations.add(client, site, first, "our own note", "owner@example.com")
    oldest = annotations.list_annotations(client, site, first, first + timedelta(minutes=1))
    assert [note.text for note in oldest] == ["our own note"]


def test_the_live_chart_reads_its_notes_once_a_minute_and_a_new_note_shows_the_next(
    dashboard_settings: Settings,
) -> None:
    """The live per-minute chart ticks every 5 s in every open dashboard: its notes are read once
    per site and chart window (dashboard/overview.py LiveChartNotes)."""
    client = connect(dashboard_settings)
    site = f"live-notes-{os.urandom(4).hex()}.example.com"
    add_site(client, site)
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    annotations.add(client, site, minute - timedelta(minutes=10), "Deploy 1", "ops@example.com")
    live = LiveChartNotes()
    window = (minute - LIVE_CHART, minute + timedelta(minutes=1))
    assert [note.text for note in live.read(client, site, *window)] == ["Deploy 1"]

    annotations.add(client, site, minute - timedelta(minutes=5), "Deploy 2", "ops@example.com")
    assert [note.text for note in live.read(client, site, *window)] == ["Deploy 1"]  # same minute: held
    later = (window[0] + timedelta(minutes=1), window[1] + timedelta(minutes=1))
    assert [note.text for note in live.read(client, site, *later)] == ["Deploy 1", "Deploy 2"]
    other = f"other-{site}"
    add_site(client, other)
    assert live.read(client, other, *later) == []  # each site its own
