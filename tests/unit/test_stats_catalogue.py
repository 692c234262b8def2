"""The catalogue of metrics and dimensions (stats/catalogue.py) is complete, and the vocabularies
written elsewhere agree with it: the stream operator's positional field lists (Python and Java),
the rollups' dimensions, the query layer's and the Plausible door's maps, the dashboard's labels."""

from __future__ import annotations

import re

from dashboard import display
from dashboard.http_api.plausible import query as plausible_query
from stats import catalogue
from stats.query import dimension_entry, key
from storage import rollup_backfill
from storage.client_names import plausible_name_sql
from storage.queries import contract, raw
from storage.schema import migration_files
from stream_jobs import activity
from tally.settings import PROJECT_ROOT

JAVA = PROJECT_ROOT / "stream_jobs/jvm/src/tally/stream/VisitorActivity.java"


def java_array(name: str) -> list[str]:
    """The strings of `static final String[] NAME = {…};` in VisitorActivity.java."""
    found = re.search(rf"static final String\[\] {name} = \{{(.*?)\}};", JAVA.read_text(), re.DOTALL)
    assert found, f"VisitorActivity.java has no {name}"
    return re.findall(r'"([^"]*)"', found.group(1))


def test_every_dimension_is_complete() -> None:
    for entry in catalogue.DIMENSIONS:
        assert entry.tally and entry.label and entry.raw_sql, entry
        assert entry.scope in ("event", "session", "time"), entry
        assert (entry.view in (1, -1)) == (entry.scope == "session"), entry
        assert entry.plausible is None or re.fullmatch(r"(event|visit|time):[a-z_]+", entry.plausible), entry
        if entry.rollup:  # what the rollups hold comes from the stream
            assert entry.stream_field, entry


def test_every_metric_is_complete() -> None:
    for entry in catalogue.METRICS:
        assert entry.plausible and entry.label and entry.raw_sql, entry
        assert entry.scope in ("event", "session"), entry


def test_names_are_unique() -> None:
    for table in (catalogue.DIMENSIONS, catalogue.METRICS):
        for name in ("tally", "plausible"):
            values = [getattr(entry, name) for entry in table if getattr(entry, name)]
            assert len(values) == len(set(values)), (table[0].__class__.__name__, name)
    assert len({key(entry) for entry in catalogue.DIMENSIONS}) == len(catalogue.DIMENSIONS)
    assert all(dimension_entry(key(entry)) == entry for entry in catalogue.DIMENSIONS)


def test_the_stream_operators_field_order_agrees_with_the_catalogue() -> None:
    """VisitorActivity reads its fields by position "in EVENT_FIELDS' order": the Java list, the
    Python list (stream_jobs/activity.py) and the catalogue's stream fields must be one list."""
    java = java_array("EVENT_FIELDS")
    assert java[0] == "event_id" and java[-1] == "screen_size"
    assert tuple(java[1:-1]) == activity.PAGEVIEW_FIELDS
    assert activity.EVENT_FIELDS[-len(activity.PAGEVIEW_FIELDS) :] == activity.PAGEVIEW_FIELDS
    read = set(java) - {"event_id", "ip_hash"}  # the event's identity and the rate limiter's key
    assert read == set(catalogue.stream_fields())


def test_the_rollups_hold_the_catalogues_dimensions_in_their_order() -> None:
    """A dimension the catalogue says the rollups hold but the operator does not emit would answer
    agg with no rows, silently (issue 31)."""
    assert java_array("EVENT_DIMENSIONS") == [entry.rollup for entry in catalogue.rolled_up("event")]
    assert java_array("SESSION_DIMENSIONS") == [entry.rollup for entry in catalogue.rolled_up("session")]


def test_every_sessions_column_is_written_by_spark_and_by_the_backfill() -> None:
    """A sessions_column neither writer fills would answer '' for every visit (issue 31): Spark's
    session row (VisitorActivity.java SESSION_ROW_FIELDS after the two paths, by position), the
    columns Python stores from it, the backfill's (the archive's sessions, by raw's property SQL)
    and the migrations' `sessions` table are one list."""
    java = ("entry_path", "exit_path", *java_array("SESSION_ROW_FIELDS"))
    assert java == activity.SESSION_ATTRIBUTES == rollup_backfill.SESSION_COLUMNS
    assert set(rollup_backfill.SESSION_COLUMNS) <= set(raw.SESSION_PROPERTIES)
    migrations = "\n".join(path.read_text() for path in migration_files())
    for entry in catalogue.DIMENSIONS:
        if entry.sessions_column:
            assert entry.sessions_column in activity.SESSION_ATTRIBUTES, entry
            assert re.search(rf"\b{entry.sessions_column}\s+(LowCardinality\()?String", migrations), entry
    stored = {entry.sessions_column for entry in catalogue.DIMENSIONS}
    assert stored >= {"utm_content", "utm_term", "screen_size", "language"}


def test_the_pages_a_visit_viewed_are_written_by_spark_and_by_the_backfill() -> None:
    """The catalogue's sessions_array (the page filter's visits, migration 0063) names a column
    Spark's session row carries (after SESSION_ROW_FIELDS, VisitorActivity.java's schema and
    row), Python stores, the backfill writes and a migration adds as Array(String); the page
    dimension has one, so a planner can answer a page filter's visit metrics from `sessions`."""
    source = JAVA.read_text()
    migrations = "\n".join(path.read_text() for path in migration_files())
    arrays = [entry for entry in catalogue.DIMENSIONS if entry.sessions_array]
    assert [entry.tally for entry in arrays] == ["path"]
    for entry in arrays:
        assert entry.scope == "event" and entry.sessions_array == activity.SESSION_PATHS, entry
        assert f'.add("{entry.sessions_array}", DataTypes.createArrayType(DataTypes.StringType' in source
        assert entry.sessions_array in activity.SESSION_COLUMNS, entry
        assert entry.sessions_array in rollup_backfill.SESSION_ARRAY_COLUMNS, entry
        assert raw.SESSION_ARRAYS[entry.sessions_array] == entry.archive_column, entry
        assert re.search(rf"\b{entry.sessions_array}\s+Array\(String\)", migrations), entry
    # Spark's row: the array right after the attributes, as the schema and the Python side read it
    schema = re.search(r"for \(String name : SESSION_ROW_FIELDS\) \{\s*schema = .*?\}\s*return schema\s*"
                       r'\.add\("(\w+)"', source, re.DOTALL)  # fmt: skip
    assert schema and schema.group(1) == activity.SESSION_PATHS


def test_the_query_layer_and_the_plausible_door_derive_from_the_catalogue() -> None:
    assert {
        "path": "path", "country": "country", "browser": plausible_name_sql("browser"),
        "os": plausible_name_sql("os"), "device": "device", "language": "language",
        "screen_size": contract.screen_size_sql("screen_width"),
    } == contract.EVENT_DIMENSIONS  # fmt: skip
    assert list(contract.SESSION_DIMENSIONS) == [
        "entry_path", "exit_path", "referrer_domain", "utm_source", "utm_medium", "utm_campaign",
        "utm_content", "utm_term",
    ]  # fmt: skip
    assert plausible_query.DIMENSIONS == {
        "event:page": "path", "visit:entry_page": "entry_path", "visit:exit_page": "exit_path",
        "visit:source": "referrer_domain", "visit:utm_source": "utm_source", "visit:utm_medium": "utm_medium",
        "visit:utm_campaign": "utm_campaign", "visit:utm_content": "utm_content",
        "visit:utm_term": "utm_term", "visit:country": "country", "visit:device": "screen_size",
        "visit:browser": "browser", "visit:os": "os", "visit:channel": "channel",
    }  # fmt: skip


def test_the_dashboards_labels_are_the_catalogues() -> None:
    for entry in catalogue.DIMENSIONS:
        if entry.tally in display.DIMENSION_LABELS:
            assert display.DIMENSION_LABELS[entry.tally] == entry.label, entry
