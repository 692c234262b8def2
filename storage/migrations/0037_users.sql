-- Team accounts (`tally users`, storage/users.py). Every table keeps its history as rows: the
-- latest row per key wins (argMax over changed_at), as for `sites`; a removal or revocation is a
-- newer row. Passwords are salted scrypt digests (hex); invitation tokens and API keys are kept
-- only as their SHA-256, so a copy of these tables signs nobody in.
CREATE TABLE IF NOT EXISTS users
(
    email           String,
    password_salt   String,
    password_digest String,
    removed         UInt8 DEFAULT 0,
    changed_at      DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY email;

-- A user's role on a site: owner, admin or viewer.
CREATE TABLE IF NOT EXISTS user_roles
(
    email      String,
    site       String,
    role       LowCardinality(String),
    removed    UInt8 DEFAULT 0,
    changed_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY (email, site);

CREATE TABLE IF NOT EXISTS user_invites
(
    token_sha256 String,
    email        String,
    site         String,
    role         LowCardinality(String),
    created_at   DateTime64(3, 'UTC'),
    expires_at   DateTime64(3, 'UTC'),
    used         UInt8 DEFAULT 0,
    changed_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY token_sha256;

-- Per-user API keys for the stats API: read-only, limited to `sites` (and, at each use, to the
-- sites the user still has a role on).
CREATE TABLE IF NOT EXISTS api_keys
(
    id           String,
    email        String,
    token_sha256 String,
    sites        Array(String),
    label        String,
    created_at   DateTime64(3, 'UTC'),
    revoked      UInt8 DEFAULT 0,
    changed_at   DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(changed_at)
ORDER BY id;
