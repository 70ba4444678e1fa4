-- Keys held right now: ?1 key prefix ('' for all), ?3 only keys after this
-- one (paging), ?2 limit. SQLite has no
-- select_for_update, so a live lease row is the only way to hold a key.
SELECT lock_key
  FROM sqlock_locks
 WHERE substr(lock_key, 1, length(?1)) = ?1 AND lock_key > ?3
   AND owner IS NOT NULL AND expires_ms > sqlock_now_ms()
 ORDER BY lock_key
 LIMIT ?2
