-- Invitations bound to who made them and to how their link travelled (storage/users.py):
-- `id` names an invitation to list, approve and revoke it (its token is never kept); `inviter` is
-- the inviting member's email, or `operator` (not an address: no account can have it); `status`
-- is pending (waits for the operator's approval), open, used or revoked; `proven` says the link
-- reached only the invited address (mailed) or the operator (made or approved by them), so it may
-- create a new account. Invitations made before this have no inviter and are void: invite again.
ALTER TABLE user_invites ADD COLUMN IF NOT EXISTS id String DEFAULT '';
ALTER TABLE user_invites ADD COLUMN IF NOT EXISTS inviter String DEFAULT '';
ALTER TABLE user_invites ADD COLUMN IF NOT EXISTS status LowCardinality(String) DEFAULT '';
ALTER TABLE user_invites ADD COLUMN IF NOT EXISTS proven UInt8 DEFAULT 0;

-- The site each audit row concerns, so an owner reads only their sites' rows; '' for an
-- account-level row (sign-ins, keys over several sites), which only the operator reads. Rows
-- written before this are account-level.
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS site String DEFAULT ''
