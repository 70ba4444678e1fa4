-- Deletes up to $1 expired unique_insert rows. SKIP LOCKED lets many
-- sweepers run at once and passes over rows a grant or a select_for_update
-- holder has locked; the outer predicate re-checks expiry on the row it
-- deletes. The fence rows are never touched, so tokens cannot go backwards.
DELETE FROM sqlock_locks
 WHERE lock_key IN (SELECT lock_key FROM sqlock_locks
                     WHERE mode = 'unique_insert' AND expires_at <= clock_timestamp()
                     LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND mode = 'unique_insert' AND expires_at <= clock_timestamp()
