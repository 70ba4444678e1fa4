-- Permit grant in one statement (SQLite's write lock makes the count and the
-- insert one serial step): ?1 name, ?2 owner, ?4 lease ms, ?5 holder, ?6 note, ?7 ticket, ?8 priority. Granted
-- when fewer than the semaphore's limit are live and no fair permit waiter is
-- ahead. Run after permit_define.sql in the same transaction; the token
-- comes from permit_bump.sql after it.
INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_ms, acquired_ms, holder, note)
SELECT 'P', ?1, ?2, s.token + 1, sqlock_now_ms() + ?4, sqlock_now_ms(), ?5, ?6
  FROM sqlock_semaphores s
 WHERE s.name = ?1
   AND (SELECT count(*) FROM sqlock_holders
         WHERE kind = 'P' AND lock_key = ?1 AND expires_ms > sqlock_now_ms()) < s.permits
   AND NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = ?1 AND w.kind = 'P' AND w.fair AND w.expires_ms > sqlock_now_ms()
                      AND (w.priority > ?8 OR (w.priority = ?8 AND w.ticket < ?7)))
RETURNING token
