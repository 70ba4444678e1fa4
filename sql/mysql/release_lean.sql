-- The lean release (migrations/mysql/0014_lean_grants.sql): ? key, ? owner.
-- Matched only while the key is still lean: nobody queued for it since its
-- grant, so there is nobody to ring. Nothing matched: the caller calls the
-- release procedure, which rings the queue (or finds the lease not ours).
UPDATE sqlock_locks SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND owner = ? AND lean
