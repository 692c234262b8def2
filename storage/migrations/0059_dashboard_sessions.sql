-- Dashboard sign-in sessions (storage/sessions.py): the browser's cookie carries only a random id,
-- this table its SHA-256 (a copy of the table signs nobody in), who it is (the operator, a team
-- member's email, or a shared link's id) and until when. Logging out, removing an account or a
-- member's role ends a session with a newer row (ended = 1); the latest row per id wins (argMax
-- over changed_at), as for `users`. Looked up by id on every request: the primary key.
CREATE TABLE IF NOT EXISTS dashboard_sessions
(
    id_sha256  String,
    kind       LowCardinality(String),
    subject    String,
    created_at DateTime64(3, 'UTC'),
    expires_at DateTime64(3, 'UTC'),
    ended      UInt8 DEFAULT 0,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX subject_index subject TYPE bloom_filter GRANULARITY 1
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY id_sha256;
