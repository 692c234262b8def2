"""The PageViewEvent as Spark sees it, derived from the one definition in tally/event.py.

The StructType is computed from the pydantic model's fields, so a field added to the
contract reaches the streaming queries without a second list to keep in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from uuid import UUID

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, MapType, StringType, StructField, StructType, TimestampType

from tally.event import PageViewEvent

# Python annotation in the contract → Spark type of its JSON value. The JSON timestamps are
# ISO-8601 with an offset (pydantic writes "…Z"); with the session time zone UTC a value
# without one is read as UTC too.
_SPARK_TYPES: dict[object, DataType] = {
    str: StringType(),
    int: LongType(),
    int | None: LongType(),  # a measurement that may be absent (Web Vitals): null stays null
    UUID: StringType(),
    datetime: TimestampType(),
    dict[str, str]: MapType(StringType(), StringType()),
}

# The fields the contract requires (no default): the archiver dead-letters a value missing
# one, so the queries skip it too. The others get the contract's default, as the archiver
# stores them (e.g. a value without `name` is a page view, without `path` it is "/").
REQUIRED_FIELDS = tuple(name for name, field in PageViewEvent.model_fields.items() if field.is_required())
DEFAULTS: dict[str, object] = {
    name: field.default
    for name, field in PageViewEvent.model_fields.items()
    if not field.is_required() and isinstance(field.default, str | int)
}
# event_id must read as a UUID (32 hex digits, hyphens optional), as pydantic requires.
_UUID_PATTERN = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"


def spark_type(annotation: object) -> DataType:
    try:
        return _SPARK_TYPES[annotation]
    except KeyError:
        raise TypeError(f"no Spark type for PageViewEvent field type {annotation!r}") from None


def pageview_schema() -> StructType:
    """The StructType of the PageViewEvent JSON value, every field nullable (lenient parsing)."""
    return StructType(
        [
            StructField(name, spark_type(field.annotation), nullable=True)
            for name, field in PageViewEvent.model_fields.items()
        ]
    )


PAGEVIEW_SCHEMA = pageview_schema()


def pageview_schema_of(fields: Iterable[str]) -> StructType:
    """The part of the schema with `fields` and the required fields, in contract order."""
    wanted = {*fields, *REQUIRED_FIELDS}
    unknown = wanted - set(PAGEVIEW_SCHEMA.fieldNames())
    if unknown:
        raise ValueError(f"not PageViewEvent fields: {sorted(unknown)}")
    return StructType([field for field in PAGEVIEW_SCHEMA.fields if field.name in wanted])


def parse_pageviews(
    kafka_rows: DataFrame,
    value: str | Column = "value",
    fields: Iterable[str] | None = None,
    kafka_columns: Iterable[str] = (),
) -> DataFrame:
    """Kafka rows → one typed column per PageViewEvent field (ts a UTC timestamp).

    A malformed value must not stop the query: from_json turns it into nulls, and rows
    missing a required field (or with an event_id that is no UUID) are dropped here, as the
    archiver dead-letters them. Absent optional fields take the contract's default. Event
    time is truncated to the millisecond, as the archive stores it.

    `fields`: parse only these (and the required ones, which decide what is skipped). The
    JSON parser then skips the rest of each value: measured 2-3x faster for a few fields.

    `kafka_columns`: columns of the Kafka row to keep beside the event's (e.g. `offset`).
    """
    schema = pageview_schema_of(fields) if fields is not None else PAGEVIEW_SCHEMA
    value_column = F.col(value) if isinstance(value, str) else value
    # explode(array(…)) of one element: a generator, which the optimizer does not inline into
    # the filter below. A plain select would be: the filter's eight null checks were pushed
    # beneath it as eight more from_json calls per value (seen in explain()), nine parses.
    parsed = F.from_json(value_column.cast("string"), schema)
    kept = list(kafka_columns)
    events = kafka_rows.select(F.explode(F.array(parsed)).alias("event"), *kept)
    events = events.select(
        *[
            F.coalesce(F.col(f"event.{name}"), F.lit(DEFAULTS[name])).alias(name)
            if name in DEFAULTS
            else F.col(f"event.{name}")
            for name in schema.fieldNames()
        ],
        *kept,
    )
    events = events.where(_all_present(REQUIRED_FIELDS) & F.col("event_id").rlike(_UUID_PATTERN))
    # The archive keeps event time to the millisecond (DateTime64(3)); so do the queries, or a
    # session's duration or the order of two page views could differ by microseconds.
    return events.withColumn("ts", F.timestamp_millis(F.unix_millis("ts")))


def _all_present(fields: tuple[str, ...]) -> Column:
    condition = F.lit(True)
    for field in fields:
        condition = condition & F.col(field).isNotNull()
    return condition
