"""The stats engine (DESIGN.md: "one query model, one catalogue of metrics and dimensions, one
planner"): every front door translates its request into `stats.query.Query`, the catalogue
(`stats.catalogue`) says what each metric and dimension is, and `stats.raw_sql` compiles any
query of the model into one ClickHouse query over the archive.

This package imports only the foundation (`tally`) and storage's public modules; importing it
has no side effect (storage.queries.contract reads the catalogue at import time).
"""
