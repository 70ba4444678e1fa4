-- Break-glass release, second statement (same transaction, after
-- force_release.sql): $1 key. Ends the rows of readers that joined the group
-- while the first statement waited for the key's row: that statement's
-- snapshot was taken before they committed, so it did not see their rows,
-- which would otherwise renew and raise the key's row again. A statement of
-- its own for a fresh snapshot; the key's row is ours by now (when it was
-- live), so no reader can join after it.
UPDATE sqlock_holders SET expires_at = clock_timestamp() - interval '1 millisecond'
 WHERE kind = 'S' AND lock_key = $1 AND expires_at > clock_timestamp()
