-- Shared grant, step 1 of a write transaction: ?1 key, ?3 lease ms, ?6
-- ticket, ?7 priority (the bindings of step 2, ?2 ?4 ?5 unused here). Takes the
-- key's row for the readers (owner 'shared', mode 'shared', expires_at at
-- least every live reader's) when it is free, expired or shared, and no
-- waiter is ahead: a live fair waiter ahead (priority, then ticket) or, for a
-- reader that is not fair, a live exclusive waiter that queued before it.
-- A reader that starts a group (the row was not a live group's) gives the
-- row a new token, the key's counter + 1, as an exclusive grant does, and the
-- triggers copy it into sqlock_fences; one that joins keeps the group's, if
-- it is still the counter's (not a group whose token was overtaken, e.g. by
-- a forced release, nor one an older library started without a token). (Up
-- to schema version 8 readers took the last writer's token, whose fence then
-- passed while they held the key: migrations/postgres/0009_reader_epochs.sql.)
-- SET reads the row as it was. Changes one row when granted.
INSERT INTO sqlock_locks (lock_key, owner, mode, token, expires_ms, acquired_ms)
SELECT ?1, 'shared', 'shared', coalesce((SELECT token FROM sqlock_fences WHERE lock_key = ?1), 0) + 1,
       sqlock_now_ms() + ?3, sqlock_now_ms()
 WHERE NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = ?1 AND w.kind <> 'P' AND w.expires_ms > sqlock_now_ms()
                      AND ((w.fair AND (w.priority > ?7 OR (w.priority = ?7 AND w.ticket < ?6)))
                        OR (?7 = -9223372036854775808 AND w.kind = 'X' AND w.ticket < ?6)))
ON CONFLICT (lock_key) DO UPDATE
   SET token = CASE WHEN owner = 'shared' AND mode = 'shared' AND expires_ms > sqlock_now_ms()
                         AND token = (SELECT token FROM sqlock_fences WHERE lock_key = ?1)
                    THEN token ELSE excluded.token END,
       acquired_ms = CASE WHEN owner = 'shared' AND mode = 'shared' AND expires_ms > sqlock_now_ms()
                          THEN acquired_ms ELSE excluded.acquired_ms END,
       expires_ms = CASE WHEN owner = 'shared' AND mode = 'shared' AND expires_ms > sqlock_now_ms()
                         THEN max(expires_ms, excluded.expires_ms) ELSE excluded.expires_ms END,
       owner = 'shared', mode = 'shared', holder = NULL, note = NULL
 WHERE owner IS NULL OR expires_ms <= sqlock_now_ms() OR (owner = 'shared' AND mode = 'shared')
