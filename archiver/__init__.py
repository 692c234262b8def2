"""The archiver: the one consumer that copies the log's `pageviews` into ClickHouse's `events`,
every event exactly once (`consumer.py`), the shape of an archived row and its insert
(`rows.py`), copies of re-sent events (`copies.py`) and the audit of the archive against the
log, with its repair (`audit.py`), reading the log's partitions, retained offsets and the
archiver's committed offsets (`log.py`). Run as `python -m archiver`.

A component: it imports the foundation (`tally`) and storage's public modules (the client, the
schema, the table names); the operator's `tally verify` and the benchmarks import it.
"""
