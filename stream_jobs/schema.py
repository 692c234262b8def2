"""The PageViewEvent as Spark sees it, derived from the one definition in tally/event.py.

The StructType is computed from the pydantic model's fields, so a field added to the
contract reaches the streaming queries without a second list to keep in step.
"""

from __future__ import annotations

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
    UUID: StringType(),
    datetime: TimestampType(),
    dict[str, str]: MapType(StringType(), StringType()),
}

# Without these a row cannot be counted or attributed: such values are dead-lettered by the
# collector and the archiver never stores them, so the queries skip them as well.
REQUIRED_FIELDS = ("event_id", "site", "ts", "visitor_id")


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


def parse_pageviews(kafka_rows: DataFrame, value: str | Column = "value") -> DataFrame:
    """Kafka rows → one typed column per PageViewEvent field (ts a UTC timestamp).

    A malformed value must not stop the query: from_json turns it into nulls, and rows
    missing a required field are dropped here.
    """
    value_column = F.col(value) if isinstance(value, str) else value
    events = kafka_rows.select(F.from_json(value_column.cast("string"), PAGEVIEW_SCHEMA).alias("event"))
    events = events.select("event.*")
    return events.where(_all_present(REQUIRED_FIELDS))


def _all_present(fields: tuple[str, ...]) -> Column:
    condition = F.lit(True)
    for field in fields:
        condition = condition & F.col(field).isNotNull()
    return condition
