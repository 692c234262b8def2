"""What provenance costs a stats request: p50/p95 of the same stats API requests
with and without `meta=true`, and of Plausible's v2 query (which always carries it), over the
dashboard benchmark's synthetic archive (bench/dashboard.py: one site, 30 days, rollups built
by the backfill), measured in-process through the Flask server.

The archive's rows come from no topic; a progress row for partition 0 is recorded (as the
stream jobs' sink would) so that the agreement check runs rather than answering "not checked".

Needs the store (`tally up -d`, or TALLY_CLICKHOUSE_URL). `python -m bench.provenance
[--events N] [--rounds R]` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime

from flask.testing import FlaskClient

from bench.dashboard import _latency, bench_site, ensure_archive, ensure_derived
from dashboard.app import build_app
from dashboard.periods import period
from storage.client import connect
from storage.schema import apply_migrations
from storage.sites import add_site
from tally.settings import Settings


def run_provenance_bench(settings: Settings, events: int, rounds: int) -> dict:
    apply_migrations(settings)
    now = datetime.now(UTC)
    archive = ensure_archive(settings, events, now)
    derived = ensure_derived(settings, bench_site(events))
    site = bench_site(events)
    client = connect(settings)
    add_site(client, site)
    client.insert(
        "stream_offsets",
        [["activity", settings.pageviews_topic, 0, 0, 0]],
        column_names=["query_name", "topic", "partition", "end_offset", "batch_id"],
    )
    api: FlaskClient = build_app(settings).server.test_client()
    headers = {"Authorization": f"Bearer {settings.resolved_api_key()}"}

    def get(query: dict[str, str]) -> Callable[[], int]:
        return lambda: api.get("/api/v1/stats/aggregate", query_string=query, headers=headers).status_code

    def post(body: dict) -> Callable[[], int]:
        return lambda: api.post("/api/v2/query", json=body, headers=headers).status_code

    figures: dict[str, dict] = {}
    for preset in ("7d", "30d"):
        shown = period(preset, now)
        query = {"site": site, "from": shown.start.isoformat(), "to": shown.end.isoformat()}
        for source in ("agg", "raw"):
            plain = _latency(get({**query, "source": source}), rounds)
            with_meta = _latency(get({**query, "source": source, "meta": "true"}), rounds)
            figures[f"aggregate {preset} {source}"] = {"plain": plain, "meta": with_meta}
        body = {"site_id": site, "metrics": ["visitors", "pageviews"], "date_range": preset}
        figures[f"v2 query {preset} agg"] = {"with meta (always)": _latency(post(body), rounds)}
    meta = api.get(
        "/api/v1/stats/aggregate",
        query_string={"site": site, "meta": "true", "from": period("30d", now).start.isoformat()},
        headers=headers,
    ).get_json()["meta"]
    return {
        "archive": {**archive, "site": site},
        "derived_tables": derived,
        "rounds": rounds,
        "load_average": os.getloadavg(),
        "agreement_30d": meta["agreement"]["status"],
        "figures_ms": figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    arguments = parser.parse_args()
    print(json.dumps(run_provenance_bench(Settings(), arguments.events, arguments.rounds), indent=2))


if __name__ == "__main__":
    main()
