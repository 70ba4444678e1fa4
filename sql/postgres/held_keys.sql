-- Keys that may be held right now: $1 key prefix ('' for all), $2 only keys
-- after this one (paging), $3 limit.
-- A live lease, or a latest grant made by select_for_update (its row lock is
-- its lease and leaves no trace in the row); inspect() then tells which.
SELECT l.lock_key
  FROM sqlock_locks l LEFT JOIN sqlock_fences f ON f.lock_key = l.lock_key
 WHERE starts_with(l.lock_key, $1) AND l.lock_key > $2
   AND ((l.owner IS NOT NULL AND l.expires_at > clock_timestamp()) OR f.row_lock_token = f.token)
 ORDER BY l.lock_key
 LIMIT $3
