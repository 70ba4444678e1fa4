-- What a fence checks: ?1 key. The key's last token, the token of its lease
-- row, and whether that lease is live by the database clock.
SELECT f.token, l.token, l.owner IS NOT NULL AND l.expires_ms > sqlock_now_ms()
  FROM (SELECT ?1 AS k) AS x
  LEFT JOIN sqlock_fences f ON f.lock_key = x.k
  LEFT JOIN sqlock_locks l ON l.lock_key = x.k
