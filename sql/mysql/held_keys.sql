-- Keys that may be held right now: ? key prefix and ? again ('' for all),
-- ? only keys after this one (paging), ? limit. A live lease, or a latest grant made by select_for_update (its row
-- lock is its lease and leaves no trace in the row); inspect() then tells which.
SELECT l.lock_key
  FROM sqlock_locks l LEFT JOIN sqlock_fences f ON f.lock_key = l.lock_key
 WHERE LEFT(l.lock_key, LENGTH(?)) = ? AND l.lock_key > ?
   AND ((l.owner IS NOT NULL AND l.expires_at > UTC_TIMESTAMP(6)) OR f.row_lock_token = f.token)
 ORDER BY l.lock_key
 LIMIT ?
