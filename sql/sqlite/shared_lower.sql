-- Shared release, step 2: ?1 key. The key's row expires with the latest live
-- reader, or is freed when none is left. One row when it was shared: the
-- wake-up channel of the client whose live waiter (not a permit's) heads the
-- key's queue when this freed the key, else NULL; the caller rings it once
-- the release has committed (src/dialects/sqlite/doorbell.hpp). The latest
-- live reader is read once: read twice, a reader expiring between the two
-- reads could leave the row owned with no expiry.
UPDATE sqlock_locks
   SET expires_ms = r.until,
       owner = CASE WHEN r.until IS NOT NULL THEN owner END
  FROM (SELECT max(expires_ms) AS until FROM sqlock_holders
         WHERE kind = 'S' AND lock_key = ?1 AND expires_ms > sqlock_now_ms()) AS r
 WHERE lock_key = ?1 AND owner = 'shared' AND mode = 'shared'
RETURNING CASE WHEN owner IS NULL THEN
              (SELECT w.listener FROM sqlock_waiters w
                WHERE w.lock_key = ?1 AND w.kind <> 'P' AND w.listener IS NOT NULL
                  AND w.expires_ms > sqlock_now_ms()
                ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1) END
