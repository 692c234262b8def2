"""Kafka's log outlives every deployment of the collector: events written by an older collector
(without the fields added since the first release) and by a newer one (with fields this release
does not know) share the topic with this release's. Each is archived once, with the contract's
defaults for what it lacks, and counted by the stream jobs as by the archive (issue 33; the
rule is in tally/event.py and DESIGN.md: fields are only ever added, a reader ignores the ones
it does not know and takes the default of the ones it misses).

Runs on the shared local stack (tests/fault/conftest.py): the real collector is bypassed on
purpose, the events go straight to `pageviews` as another version of it would have written them.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import httpx
import orjson
import pytest

from tally.clock import utc_now
from tally.event import VITAL_FIELDS, event_key
from tests.fixtures.events import page_view
from tests.fixtures.local_stack import LocalStack, eventually
from tests.integration.test_archiver import produce

pytestmark = pytest.mark.integration

SITE = "contract-versions.example.com"
#: Fields the contract gained after the first release (dc31cfa): an event of that release lacks them.
ADDED_SINCE_FIRST_RELEASE = (
    "revenue_amount",
    "revenue_currency",
    "scroll_depth",
    "engagement_ms",
    *VITAL_FIELDS,
)
#: Fields a later release might add, of every JSON kind.
UNKNOWN_FIELDS = {"consent": "granted", "vitals": {"lcp_ms": 1200, "cls": 0.02}, "tags": ["a"], "bot": False}


def event(path: str, ts: datetime) -> dict[str, object]:
    """This release's event, as the collector writes it."""
    current = page_view(
        SITE,
        f"visitor-{path}",
        ts,
        path,
        hostname=SITE,
        country="DE",
        browser="Firefox",
        props={"plan": "pro"},
    )
    return json.loads(current.to_json())


def versions(ts: datetime) -> dict[str, dict[str, object]]:
    older = {k: v for k, v in event("/older", ts).items() if k not in ADDED_SINCE_FIRST_RELEASE}
    del older["props"]  # a field with a default, absent altogether
    # This release's event carries a measured LCP of 1200 ms; an older one could not say.
    current = event("/current", ts) | {"lcp_ms": 1200}
    return {"older": older, "current": current, "newer": event("/newer", ts) | UNKNOWN_FIELDS}


def archived(stack: LocalStack) -> list[list[str]]:
    sql = (
        "SELECT path, toString(scroll_depth), revenue_amount, toString(length(props)), "
        "ifNull(toString(lcp_ms), 'unmeasured') FROM events "
        f"WHERE site = '{SITE}' ORDER BY path"
    )
    result = stack.tally("query", sql, "--format", "csv", timeout=60)
    assert result.returncode == 0, result.stderr
    return [line.replace('"', "").split(",") for line in result.stdout.strip().splitlines()[1:]]


def pageviews_by_path(stack: LocalStack, source: str, start: datetime, end: datetime) -> dict[str, int]:
    settings = stack.settings
    response = httpx.get(
        f"http://127.0.0.1:{settings.dashboard_port}/api/v1/stats/breakdown",
        params={
            "site": SITE,
            "from": start.isoformat(),
            "to": end.isoformat(),
            "by": "path",
            "source": source,
        },
        headers={"Authorization": f"Bearer {settings.resolved_api_key()}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return {row["value"]: row["pageviews"] for row in response.json()}


def test_events_of_an_older_and_a_newer_collector_are_archived_and_counted(local_stack: LocalStack) -> None:
    stack = local_stack
    assert stack.tally("sites", "add", SITE).returncode == 0
    ts = utc_now().replace(microsecond=0)
    values = [
        (event_key(str(v["site"]), str(v["visitor_id"])), orjson.dumps(v)) for v in versions(ts).values()
    ]
    asyncio.run(produce(stack.settings, values))

    expected = [
        ["/current", "0", "", "1", "1200"],
        ["/newer", "0", "", "1", "unmeasured"],
        ["/older", "0", "", "0", "unmeasured"],
    ]
    eventually(lambda: archived(stack) == expected, "the three versions in the archive, with defaults", 120)

    start, end = ts - timedelta(hours=1), ts + timedelta(hours=1)
    counts = {"/older": 1, "/current": 1, "/newer": 1}
    eventually(lambda: pageviews_by_path(stack, "agg", start, end) == counts, "agg counts all three", 120)
    assert pageviews_by_path(stack, "raw", start, end) == counts
