-- sqlock waiter queue for PostgreSQL (fair mode and blocking acquire).
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).

-- One row per waiting acquisition. A fair acquisition is granted only when no
-- live fair waiter is ahead of it (higher priority, then lower ticket); a
-- waiter's row is a lease too, heartbeated by its client's watchdog, so a
-- crashed waiter stops counting once its row expires and the queue never stalls.
CREATE TABLE IF NOT EXISTS sqlock_waiters (
    ticket      bigserial PRIMARY KEY,
    lock_key    text NOT NULL CHECK (octet_length(lock_key) BETWEEN 1 AND 255),
    owner       text NOT NULL,
    fair        boolean NOT NULL,
    priority    integer NOT NULL,
    expires_at  timestamptz NOT NULL,
    listener    text,  -- LISTEN channel of the waiting client: releases NOTIFY the head waiter
    holder      text,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX IF NOT EXISTS sqlock_waiters_queue ON sqlock_waiters (lock_key, fair, priority DESC, ticket);

INSERT INTO sqlock_schema_version (version, name) VALUES (2, 'waiters') ON CONFLICT DO NOTHING;
