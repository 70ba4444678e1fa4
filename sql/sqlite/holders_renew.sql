-- The watchdog's renewal of shared holders and permits, step 1 of a write
-- transaction: ?1 JSON array of {"k", "o", "ms", "t"}. Returns the owners
-- renewed. A shared holder is renewed only while its key's row is its
-- group's: the readers', live, with the reader's token (not a later group's,
-- after a writer or a forced release); step 2 (holders_raise.sql) raises that
-- row's expiry. A reader's row never outlives its key's row
-- (shared_insert.sql), but an earlier build's could, by a millisecond.
UPDATE sqlock_holders
   SET expires_ms = sqlock_now_ms() + b.ms
  FROM (SELECT value ->> 'k' AS k, value ->> 'o' AS o, value ->> 'ms' AS ms, value ->> 't' AS t
          FROM json_each(?1)) AS b
 WHERE sqlock_holders.kind = b.t AND sqlock_holders.lock_key = b.k AND sqlock_holders.owner = b.o
   AND sqlock_holders.expires_ms > sqlock_now_ms()
   AND (b.t = 'P' OR EXISTS (SELECT 1 FROM sqlock_locks l
                              WHERE l.lock_key = b.k AND l.owner = 'shared' AND l.mode = 'shared'
                                AND l.expires_ms > sqlock_now_ms() AND l.token = sqlock_holders.token))
RETURNING owner
