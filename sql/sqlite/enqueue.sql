-- A waiter takes a ticket: ?1 key, ?2 owner, ?3 fair, ?4 priority, ?5 lease
-- ms, ?6 listener, ?7 holder. Its arrival, enqueued_ms, is sqlock_now_ms(),
-- the clock every lease is read by, not the column's default (julianday(),
-- libc's clock, which a client with a skewed clock fakes; sqlite.cpp).
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_ms, enqueued_ms, listener, holder)
VALUES (?1, ?2, ?3, ?4, sqlock_now_ms() + ?5, sqlock_now_ms(), ?6, ?7)
RETURNING ticket
