"""The storage-cost benchmark (bench/storage_cost.py) at a small size on the real ClickHouse
engine: its page views are the collector's own (enriched, encoded for the log), its archive rows
the archiver's, and it leaves no scratch table behind. The sizes are what docs/capacity.md is
built on; this checks how they are measured, not how large they are."""

from __future__ import annotations

import pytest

from bench.storage_cost import bench_storage_cost, realistic_records
from storage.client import connect
from tally.event import PageViewEvent
from tally.settings import Settings

pytestmark = pytest.mark.integration


def test_page_views_are_the_collectors_enriched_events() -> None:
    events = [PageViewEvent.from_json(value) for _key, value in realistic_records(300)]
    assert len(events) == 300
    assert {event.name for event in events} == {"pageview"}
    assert len({event.site for event in events}) > 1 and len({event.visitor_id for event in events}) > 10
    assert {event.browser for event in events} - {""} and {event.country for event in events} - {""}
    assert any(event.referrer_domain for event in events)


def test_bytes_per_page_view_in_the_log_and_the_archive(dashboard_settings: Settings) -> None:
    client = connect(dashboard_settings)
    tables_before = {row[0] for row in client.query("SHOW TABLES").result_rows}
    result = bench_storage_cost(dashboard_settings, count=2_000)
    by_batch = list(result["log_bytes_per_event_by_batch"].values())
    assert by_batch == sorted(by_batch, reverse=True)  # more records a batch: fewer bytes each
    assert by_batch[0] < result["encoded_bytes_per_event"]  # lz4 shrinks even a lone record
    assert 0 < result["archive_bytes_per_event"] < by_batch[0]
    assert "event_id" in result["archive_largest_columns_bytes_per_event"]
    assert {row[0] for row in client.query("SHOW TABLES").result_rows} == tables_before
