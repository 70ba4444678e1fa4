-- Lease-mode acquire in one statement: $1 key, $2 owner, $3 mode, $4 lease ms,
-- $5 holder, $6 note, $7 the requester's waiter ticket (max bigint: none),
-- $8 its priority (min bigint: not fair, so every live fair waiter is ahead).
--
-- The key is granted only when no live waiter is ahead of the requester and
-- the lock row is free, expired or its own. Ahead: a fair waiter of higher
-- priority, or of the same priority with a lower ticket; and, for a request
-- that is not fair, also a waiter that is not fair either, has a lower ticket
-- and has waited 2 ms or more (no barging past a queue: the releaser cannot
-- re-win the key over waiters that were already waiting; a waiter that has
-- only just queued may still be passed, which keeps handoffs cheap). Waiters
-- for a permit of a semaphore of the same name (kind 'P') are not the lock's.
-- The upsert keeps the lock row locked until commit, so the fence bump that
-- follows in the same statement happens after exclusion is established; no
-- token is drawn (or burnt) by an attempt that loses. A granted waiter leaves
-- the queue in the same statement. remaining_ms reads the holder's lease from
-- the statement's snapshot, for the caller's backoff.
WITH {{grant_cte}}, dequeued AS (
    DELETE FROM sqlock_waiters WHERE ticket = $7::bigint AND EXISTS (SELECT 1 FROM granted)
)
SELECT (SELECT token FROM fenced) AS token,
       (SELECT greatest(0, ceil(extract(epoch FROM (expires_at - clock_timestamp())) * 1000))::bigint
          FROM sqlock_locks WHERE lock_key = $1 AND owner IS NOT NULL) AS remaining_ms
