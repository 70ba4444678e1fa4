-- sqlock job ledger for SQLite.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- Times are integer milliseconds since the Unix epoch by the database's clock.

-- One row per (job, run key): the record of a run that job_runner keeps.
-- A row is written only in a write transaction that first checks the run's
-- lease is held with its token; SQLite's single writer means no grant can
-- slip in before that transaction commits.
CREATE TABLE IF NOT EXISTS sqlock_job_runs (
    job         TEXT NOT NULL,
    run_key     TEXT NOT NULL,
    status      TEXT NOT NULL,
    owner       TEXT NOT NULL,
    holder      TEXT,
    token       INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    started_ms  INTEGER NOT NULL,
    finished_ms INTEGER,
    retry_ms    INTEGER,
    result      TEXT,
    last_error  TEXT,
    PRIMARY KEY (job, run_key)
);

CREATE INDEX IF NOT EXISTS sqlock_job_runs_started ON sqlock_job_runs (started_ms);

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (3, 'jobs');
