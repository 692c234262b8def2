-- What a member's API key may do (storage/users.py): `read` (the stats API, as before) or
-- `manage` (also the settings and accounts endpoints its user's role allows: exclusions and
-- email reports for admins, members, invitations and the audit log for owners). Keys made before
-- are read-only, as they were described when they were made.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scope LowCardinality(String) DEFAULT 'read';
