-- sqlock job ledger and fences for application writes, for PostgreSQL.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).

-- One row per (job, run key): the record of a run that job_runner keeps.
-- A row is written only in a transaction that first fences the run's lease
-- (sqlock_assert_held below), so a run that lost its lease cannot record
-- anything, least of all success.
CREATE TABLE IF NOT EXISTS sqlock_job_runs (
    job         text NOT NULL CHECK (octet_length(job) BETWEEN 1 AND 100),
    run_key     text NOT NULL CHECK (octet_length(run_key) BETWEEN 1 AND 128),
    status      text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    owner       text NOT NULL,
    holder      text,
    token       bigint NOT NULL,
    attempts    integer NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    retry_at    timestamptz,  -- a failed run may be retried from then on
    result      text,
    last_error  text,
    PRIMARY KEY (job, run_key)
);

-- The sweeper deletes rows older than the retention by start time.
CREATE INDEX IF NOT EXISTS sqlock_job_runs_started ON sqlock_job_runs (started_at);

-- The token of the key's latest select_for_update grant. That mode keeps no
-- lease in sqlock_locks (its row lock is the lease), so a fence recognises
-- it by this column.
ALTER TABLE sqlock_fences ADD COLUMN IF NOT EXISTS row_lock_token bigint;

-- Fails unless the lease on p_key with fencing token p_token is held right
-- now, by database time; call it first in a transaction that writes what the
-- lease protects. It share-locks the key's fence row, and every grant bumps
-- that row, so no other owner can be granted the key until the calling
-- transaction ends: what it writes commits while the lease is still held, or
-- not at all. Raises SQLSTATE 'SQ001' when the lease is not held.
-- Under REPEATABLE READ or SERIALIZABLE, call it before the transaction's
-- first query: the lease row is read from the transaction's snapshot.
CREATE OR REPLACE FUNCTION sqlock_assert_held(p_key text, p_token bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    current_token bigint;
    row_lock      bigint;
    live          boolean;
BEGIN
    SELECT token, row_lock_token INTO current_token, row_lock
      FROM sqlock_fences WHERE lock_key = p_key FOR SHARE;
    IF current_token IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ001',
            MESSAGE = format('sqlock: the lease on %L is not held: the key was never granted', p_key);
    END IF;
    IF current_token <> p_token THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ001',
            MESSAGE = format('sqlock: the lease on %L with token %s is not held: the key was granted again (token %s)',
                             p_key, p_token, current_token);
    END IF;
    IF row_lock = p_token THEN
        RETURN p_token;  -- a select_for_update grant, and no grant since
    END IF;
    SELECT owner IS NOT NULL AND expires_at > clock_timestamp() INTO live
      FROM sqlock_locks WHERE lock_key = p_key;
    IF live IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ001',
            MESSAGE = format('sqlock: the lease on %L with token %s is not held: it expired or was released',
                             p_key, p_token);
    END IF;
    RETURN p_token;
END
$$;

INSERT INTO sqlock_schema_version (version, name) VALUES (3, 'jobs') ON CONFLICT DO NOTHING;
