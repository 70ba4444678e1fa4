-- The lean grant (migrations/mysql/0014_lean_grants.sql): ? owner, ? lease ms,
-- ? holder, ? note, ? key, ? the token this client last saw on the key. One
-- UPDATE of the lock row alone, matched only while the key is lean (nobody
-- waits for it) and its counter is still the expected one, so the new token
-- is that one plus one: known without reading it back. Nothing matched: the
-- key is held, waited for, or was granted by someone else since; the caller
-- then calls the grant procedure.
UPDATE sqlock_locks
   SET owner = ?, mode = 'conditional_update',
       expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND,
       acquired_at = UTC_TIMESTAMP(6), holder = ?, note = ?, token = token + 1
 WHERE lock_key = ? AND lean AND token = ? AND (owner IS NULL OR expires_at <= UTC_TIMESTAMP(6))
