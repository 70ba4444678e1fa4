-- Permit release: ?1 name, ?2 owner. One row when a permit was given back:
-- whether it was live, and the wake-up channel of the client whose live
-- permit waiter heads the semaphore's queue (NULL when none); the caller
-- rings it once the release has committed (src/dialects/sqlite/doorbell.hpp).
DELETE FROM sqlock_holders WHERE kind = 'P' AND lock_key = ?1 AND owner = ?2
RETURNING expires_ms > sqlock_now_ms(),
          (SELECT w.listener FROM sqlock_waiters w
            WHERE w.lock_key = ?1 AND w.kind = 'P' AND w.listener IS NOT NULL AND w.expires_ms > sqlock_now_ms()
            ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1)
