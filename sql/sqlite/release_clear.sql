-- conditional_update release: ?1 key, ?2 owner. One row when released: the wake-up
-- channel of the client whose live waiter heads the key's queue (fair
-- waiters first, by priority then ticket; then the others by ticket), NULL
-- when none; the caller rings it once this has committed
-- (src/dialects/sqlite/doorbell.hpp).
UPDATE sqlock_locks SET owner = NULL, expires_ms = NULL WHERE lock_key = ?1 AND owner = ?2
RETURNING (SELECT w.listener FROM sqlock_waiters w
            WHERE w.lock_key = ?1 AND w.kind <> 'P' AND w.listener IS NOT NULL AND w.expires_ms > sqlock_now_ms()
            ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1)
