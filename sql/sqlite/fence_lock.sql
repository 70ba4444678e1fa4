-- Takes SQLite's write lock for the calling transaction (a write statement
-- does, even one that changes nothing): ?1 key. Every grant is a write, so
-- none can run until this transaction ends.
UPDATE sqlock_fences SET token = token WHERE lock_key = ?1
