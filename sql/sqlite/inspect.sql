-- ?1 key.
SELECT l.owner, l.mode, l.holder, l.note,
       CASE WHEN l.owner IS NOT NULL
             AND l.expires_ms > sqlock_now_ms()
            THEN l.expires_ms - sqlock_now_ms() END,
       coalesce((SELECT token FROM sqlock_fences WHERE lock_key = ?1), 0)
  FROM (SELECT ?1 AS k) LEFT JOIN sqlock_locks l ON l.lock_key = k
