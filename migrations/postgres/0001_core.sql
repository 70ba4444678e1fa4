-- sqlock core schema for PostgreSQL.
-- Apply by hand with: psql "$URL" -v ON_ERROR_STOP=1 -1 -f 0001_core.sql
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).

CREATE TABLE IF NOT EXISTS sqlock_schema_version (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per key ever granted, never deleted: the fencing counter. It is
-- bumped only by a grant, in the transaction that establishes exclusion on the
-- key's row in sqlock_locks, so tokens rise in grant order and survive row
-- deletions, sweeps and restarts.
CREATE TABLE IF NOT EXISTS sqlock_fences (
    lock_key text PRIMARY KEY CHECK (octet_length(lock_key) BETWEEN 1 AND 255),
    token    bigint NOT NULL
);

-- The key's current lease. unique_insert deletes the row at release;
-- conditional_update keeps it and clears owner, so its updates stay HOT
-- (no index covers the columns that change, and fillfactor leaves room).
-- select_for_update holds the row lock in a transaction and writes nothing.
CREATE TABLE IF NOT EXISTS sqlock_locks (
    lock_key    text PRIMARY KEY CHECK (octet_length(lock_key) BETWEEN 1 AND 255),
    owner       text,
    mode        text,
    expires_at  timestamptz,
    acquired_at timestamptz,
    holder      text,
    note        text
) WITH (fillfactor = 70);

INSERT INTO sqlock_schema_version (version, name) VALUES (1, 'core') ON CONFLICT DO NOTHING;
