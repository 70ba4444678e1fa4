-- Permit release: ? name, ? owner. One row: 1 when the permit was live.
-- (A DELETE's count cannot tell a live permit from an expired one.)
SELECT COUNT(*) FROM sqlock_holders WHERE kind = 'P' AND lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
