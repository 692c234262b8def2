"""Exclusions per site on the real collector, Kafka and archive: traffic from an excluded IP
range, to an excluded path or from an excluded country is answered 202 and never reaches
`events`; other traffic does; an exclusion (and its removal) takes effect within the
collector's refresh; the CLI's mistakes are one line."""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid

import httpx
import pytest

from archiver.consumer import Archiver
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.cli import run_tally
from tests.fixtures.collector_server import register_site

pytestmark = pytest.mark.integration

BROWSER_UA = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
)
# Generous: the collector re-reads exclusions every 2 s; a loaded machine may take longer.
TAKES_EFFECT_WITHIN_S = 60
GERMAN_IP = "85.214.0.1"  # the collector's country database places it in DE
AMERICAN_IP = "8.8.8.8"


def tally(settings: Settings, *args: str) -> tuple[int, str, str]:
    done = run_tally(os.environ | settings.environment(), *args)
    return done.returncode, done.stdout, done.stderr


def send(settings: Settings, collector_url: str, site: str, events: list[tuple[str, str]]) -> dict:
    """Post (ip, path) events as a server-side batch; the collector's JSON answer."""
    batch = [
        {"site": site, "url": f"https://{site}{path}", "ip": ip, "user_agent": BROWSER_UA}
        for ip, path in events
    ]
    headers = {"Authorization": f"Bearer {settings.resolved_ingest_key()}"}
    answer = httpx.post(f"{collector_url}/api/events", json=batch, headers=headers, timeout=10)
    assert answer.status_code == 202, answer.text
    return answer.json()


def until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + TAKES_EFFECT_WITHIN_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {TAKES_EFFECT_WITHIN_S}s")
        time.sleep(0.3)


def archived_paths(settings: Settings, site: str) -> list[str]:
    rows = connect(settings).query(
        "SELECT path FROM events WHERE site = {site:String} ORDER BY path", parameters={"site": site}
    )
    return [row[0] for row in rows.result_rows]


def archive_until_paths(settings: Settings, site: str, wanted: set[str]) -> list[str]:
    async def run() -> list[str]:
        archiver = Archiver(settings, connect(settings))
        task = asyncio.create_task(archiver.run())
        deadline = time.monotonic() + 240
        while not wanted <= set(archived_paths(settings, site)) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        archiver.stop()
        await task
        return archived_paths(settings, site)

    return asyncio.run(run())


def excluded_count(collector_url: str, rule: str) -> float:
    metrics = httpx.get(f"{collector_url}/metrics", timeout=10).text
    found = re.search(rf'^tally_events_excluded_total{{rule="{rule}"}} (\S+)$', metrics, re.MULTILINE)
    return float(found[1]) if found else 0.0


def test_excluded_traffic_never_reaches_the_archive(settings: Settings, collector_url: str) -> None:
    site = f"excl-{uuid.uuid4().hex[:8]}.example.com"
    register_site(settings, collector_url, site)
    code, out, err = tally(
        settings,
        *("sites", "exclude", site, "--ip", "203.0.113.0/24", "--ip", "2001:db8::/32"),
        *("--path", "/admin/*", "--country", "de"),
    )
    assert code == 0, err
    assert "excluded country DE" in out
    code, out, _ = tally(settings, "sites", "exclusions", site)
    assert out.splitlines() == ["country\tDE", "ip\t2001:db8::/32", "ip\t203.0.113.0/24", "path\t/admin/*"]

    # The collector applies them within its refresh: until then a probe is still accepted.
    until(
        lambda: send(settings, collector_url, site, [(AMERICAN_IP, "/admin/probe")])["dropped"],
        "the path exclusion",
    )
    before = {rule: excluded_count(collector_url, rule) for rule in ("ip", "path", "country")}
    answer = send(
        settings,
        collector_url,
        site,
        [
            ("203.0.113.7", "/by-ipv4"),
            ("2001:db8::42", "/by-ipv6"),
            (AMERICAN_IP, "/admin/users"),
            (GERMAN_IP, "/by-country"),
            (AMERICAN_IP, "/kept"),
            ("2001:db9::1", "/kept-ipv6"),
            (AMERICAN_IP, "/administration"),  # not under /admin/
        ],
    )
    assert answer == {"accepted": 3, "dropped": {"excluded": 4}}
    # A browser's beacon to an excluded page gets a 202 like any other, and is dropped.
    beacon = httpx.post(
        f"{collector_url}/api/event",
        json={"site": site, "url": f"https://{site}/admin/beacon"},
        headers={"User-Agent": BROWSER_UA},
        timeout=10,
    )
    assert beacon.status_code == 202
    after = {rule: excluded_count(collector_url, rule) for rule in ("ip", "path", "country")}
    assert {rule: after[rule] - before[rule] for rule in after} == {"ip": 2, "path": 2, "country": 1}

    # Removing the path exclusion counts those pages again, from then on.
    code, out, err = tally(settings, "sites", "unexclude", site, "--path", "/admin/*")
    assert code == 0, err
    until(
        lambda: send(settings, collector_url, site, [(AMERICAN_IP, "/admin/again")])["accepted"],
        "the removal",
    )
    paths = archive_until_paths(settings, site, {"/kept", "/kept-ipv6", "/administration", "/admin/again"})
    assert {"/kept", "/kept-ipv6", "/administration", "/admin/again"} <= set(paths)
    for excluded in ("/by-ipv4", "/by-ipv6", "/admin/users", "/by-country", "/admin/beacon"):
        assert excluded not in paths


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--ip", "10.0.0.300/8"], "--ip: '10.0.0.300/8' is not an IP address or CIDR range"),
        (["--country", "Germany"], "--country: 'Germany' is not an ISO 3166 two-letter code"),
        (["--path", "admin"], "--path: a page pattern starts with /"),
        ([], "name at least one --ip, --path or --country"),
    ],
)
def test_bad_exclusions_are_one_line(settings: Settings, arguments: list[str], message: str) -> None:
    code, _, err = tally(settings, "sites", "exclude", "example.com", *arguments)
    assert code != 0
    assert err.startswith("tally: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_exclusions_of_an_unknown_site_or_a_missing_one_are_one_line(settings: Settings) -> None:
    site = f"nowhere-{uuid.uuid4().hex[:8]}.example.com"
    code, _, err = tally(settings, "sites", "exclude", site, "--ip", "10.0.0.0/8")
    assert code != 0 and err.strip() == (
        f"tally: site: {site} is not registered (see 'tally sites list'; to add it: 'tally sites add {site}')"
    )
    code, _, err = tally(settings, "sites", "unexclude", site, "--ip", "10.0.0.0/8")
    assert code != 0 and err.startswith(f"tally: not excluded from {site}: ip 10.0.0.0/8")
    assert len(err.strip().splitlines()) == 1
