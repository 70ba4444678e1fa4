-- Lease-mode acquire in one statement: ?1 key, ?2 owner, ?3 mode, ?4 lease ms,
-- ?5 holder, ?6 note. A write statement takes SQLite's write lock before it
-- reads, so the counter read and the grant are one serial step; the
-- triggers copy the new token into sqlock_fences.
INSERT INTO sqlock_locks (lock_key, owner, mode, token, expires_ms, acquired_ms, holder, note)
VALUES (?1, ?2, ?3,
        coalesce((SELECT token FROM sqlock_fences WHERE lock_key = ?1), 0) + 1,
        sqlock_now_ms() + ?4,
        sqlock_now_ms(), ?5, ?6)
ON CONFLICT (lock_key) DO UPDATE
   SET owner = excluded.owner, mode = excluded.mode, token = excluded.token,
       expires_ms = excluded.expires_ms, acquired_ms = excluded.acquired_ms,
       holder = excluded.holder, note = excluded.note
 WHERE sqlock_locks.owner IS NULL
    OR sqlock_locks.expires_ms <= sqlock_now_ms()
    OR sqlock_locks.owner = excluded.owner
RETURNING token
