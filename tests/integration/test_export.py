"""`tally export`: a site's raw events for a range, as Parquet or CSV, and nothing else."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pyarrow.parquet as pq
import pytest

from storage.client import connect
from storage.export import export_events
from tally.settings import Settings
from tests.fixtures.events import START, archive_rows, make_events

pytestmark = pytest.mark.integration

SITE = "export.example.com"


@pytest.fixture(scope="module")
def archived(settings: Settings) -> list:
    events = make_events(SITE, 300) + make_events("other-export.example.com", 20)
    rows, columns = archive_rows(events)
    connect(settings).insert("events", rows, column_names=columns)
    return events


def test_parquet_export_holds_exactly_the_sites_events_in_range(settings: Settings, archived: list) -> None:
    buffer = io.BytesIO()
    count = export_events(settings, SITE, START, START + timedelta(seconds=100), "parquet", buffer)
    table = pq.read_table(io.BytesIO(buffer.getvalue()))
    expected = sorted(str(e.event_id) for e in archived[:100])
    assert count == table.num_rows == 100
    assert sorted(str(v) for v in table.column("event_id").to_pylist()) == expected
    assert "kafka_offset" not in table.column_names
    assert set(table.column("site").to_pylist()) == {SITE}


def test_csv_export_has_a_header_and_one_line_per_event(settings: Settings, archived: list) -> None:
    buffer = io.BytesIO()
    export_events(settings, SITE, START, START + timedelta(days=1), "csv", buffer)
    rows = list(csv.DictReader(io.StringIO(buffer.getvalue().decode())))
    assert len(rows) == 300
    assert rows[0]["site"] == SITE and rows[0]["path"].startswith("/p")
