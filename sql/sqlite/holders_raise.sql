-- Renewal, step 2: ?1 the same JSON array. Each shared key's row expires no
-- earlier than the latest live reader of its group, while that row is live:
-- only readers with the row's token (not a reader of an older group whose
-- row outlived the group's: an earlier build's, see shared_insert.sql), and
-- only a row not yet expired (an expired group is over; raising it again
-- would revive it, and with it every reader of the group). Only keys with a
-- live reader: max() of SQLite is NULL when an argument is, and a key whose
-- readers' rows were all gone (a forced release, then a sweep) used to be
-- left owned by 'shared' with no expiry, which no grant took again.
UPDATE sqlock_locks
   SET expires_ms = max(expires_ms, r.until)
  FROM (SELECT h.lock_key AS k, h.token AS t, max(h.expires_ms) AS until FROM sqlock_holders h
         WHERE h.kind = 'S' AND h.expires_ms > sqlock_now_ms()
           AND h.lock_key IN (SELECT value ->> 'k' FROM json_each(?1) WHERE value ->> 't' = 'S')
         GROUP BY h.lock_key, h.token) AS r
 WHERE sqlock_locks.lock_key = r.k AND sqlock_locks.token = r.t AND sqlock_locks.owner = 'shared'
   AND sqlock_locks.mode = 'shared' AND sqlock_locks.expires_ms > sqlock_now_ms()
