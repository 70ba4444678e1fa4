-- Lease-mode acquire in one statement: ?1 key, ?2 owner, ?3 mode, ?4 lease ms,
-- ?5 holder, ?6 note, ?7 the requester's waiter ticket (max: none), ?8 its
-- priority (min: not fair, so every live fair waiter is ahead). Granted only
-- when no live waiter is ahead and the lock row is free, expired or its own;
-- ahead as in sql/postgres/grant.sql (a fair waiter by priority then ticket;
-- for a request that is not fair, also an earlier waiter that is not fair and
-- has waited 2 ms or more). Waiters for a permit of a semaphore of the same
-- name (kind 'P') are not the lock's. A write statement takes SQLite's write
-- lock before it reads, so the counter read and the grant are one serial step;
-- the triggers copy the new token into sqlock_fences. A row owned with no
-- expiry is nobody's lease: the readers' renewal of earlier releases
-- left one when the readers' rows were gone (holders_raise.sql).
INSERT INTO sqlock_locks (lock_key, owner, mode, token, expires_ms, acquired_ms, holder, note)
SELECT ?1, ?2, ?3, coalesce((SELECT token FROM sqlock_fences WHERE lock_key = ?1), 0) + 1,
       sqlock_now_ms() + ?4, sqlock_now_ms(), ?5, ?6
 WHERE NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = ?1 AND w.kind <> 'P' AND w.expires_ms > sqlock_now_ms()
                      AND CASE WHEN w.fair THEN w.priority > ?8 OR (w.priority = ?8 AND w.ticket < ?7)
                               ELSE ?8 = -9223372036854775808 AND w.ticket < ?7
                                    AND w.enqueued_ms <= sqlock_now_ms() - 2 END)
ON CONFLICT (lock_key) DO UPDATE
   SET owner = excluded.owner, mode = excluded.mode, token = excluded.token,
       expires_ms = excluded.expires_ms, acquired_ms = excluded.acquired_ms,
       holder = excluded.holder, note = excluded.note
 WHERE sqlock_locks.owner IS NULL
    OR sqlock_locks.expires_ms <= sqlock_now_ms()
    OR sqlock_locks.expires_ms IS NULL
    OR sqlock_locks.owner = excluded.owner
RETURNING token
