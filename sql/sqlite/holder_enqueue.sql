-- A shared or permit waiter takes a ticket: ?1 key, ?2 owner, ?3 fair, ?4
-- priority, ?5 lease ms, ?6 listener, ?7 holder, ?8 kind ('S' or 'P'). Its
-- arrival is sqlock_now_ms(), as in enqueue.sql.
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_ms, enqueued_ms, listener, holder, kind)
VALUES (?1, ?2, ?3, ?4, sqlock_now_ms() + ?5, sqlock_now_ms(), ?6, ?7, ?8)
RETURNING ticket
