-- ? key: its fencing counter as committed (0 when never granted): the fence
-- row's, or the lock row's while the key is lean and that one runs ahead
-- (migrations/mysql/0014_lean_grants.sql). Read without locking.
SELECT GREATEST(COALESCE(MAX(f.token), 0), COALESCE(MAX(l.token), 0))
  FROM (SELECT ? AS k) AS one
  LEFT JOIN sqlock_fences f ON f.lock_key = one.k
  LEFT JOIN sqlock_locks l ON l.lock_key = one.k
