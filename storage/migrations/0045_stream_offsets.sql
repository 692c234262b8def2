-- Provenance: how far each streaming query has read the log. After each micro-batch
-- the sink records, per partition of the topic it reads, the end offset of that batch (the
-- offset log's, exclusive: every offset below it is processed and its rows are in the derived
-- tables). With `stream_watermarks` this is the stream jobs' progress a stats answer's `meta`
-- publishes, and the prefix of the archive it compares agg with.
-- batch_id only grows within one checkpoint; replay rebuilds this table with the others.
CREATE TABLE IF NOT EXISTS stream_offsets
(
    query_name LowCardinality(String),
    topic      LowCardinality(String),
    partition  UInt16,
    end_offset UInt64,
    batch_id   UInt64,
    written_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(batch_id)
ORDER BY (query_name, topic, partition);
