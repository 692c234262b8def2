-- Read-only dashboard links (`tally share`, the dashboard's Share panel). Only the SHA-256 of a
-- link's token is kept, so a copy of this table opens nothing; a password is a salted scrypt
-- digest (hex). A revocation is a new row for the same id with revoked = 1: the latest row per
-- id wins (read with argMax over changed_at), as for `sites`.
CREATE TABLE IF NOT EXISTS shared_links
(
    id              String,
    site            String,
    label           String,
    token_sha256    String,
    password_salt   String,
    password_digest String,
    created_at      DateTime64(3, 'UTC'),
    revoked         UInt8 DEFAULT 0,
    changed_at      DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY id;
