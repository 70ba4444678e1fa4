-- sqlock reader-writer locks and counting semaphores for PostgreSQL.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- See docs/design.md, "Shared locks and semaphores", for why exclusion and
-- the N-bound hold.

-- What a waiter waits for: 'X' an exclusive grant (every waiter before this
-- version), 'S' a shared grant, 'P' a semaphore permit. A waiting writer holds
-- off new readers that are not fair.
ALTER TABLE sqlock_waiters ADD COLUMN IF NOT EXISTS kind char(1) NOT NULL DEFAULT 'X';

-- One row per shared holder ('S', lock_key is the lock's key) and per
-- semaphore permit ('P', lock_key is the semaphore's name): each a lease with
-- an owner of its own. A shared holder's token is the key's fencing counter
-- when it was granted (the exclusive epoch); a permit's is the semaphore's.
CREATE TABLE IF NOT EXISTS sqlock_holders (
    kind        char(1) NOT NULL CHECK (kind IN ('S', 'P')),
    lock_key    text NOT NULL CHECK (octet_length(lock_key) BETWEEN 1 AND 255),
    owner       text NOT NULL,
    token       bigint NOT NULL,
    expires_at  timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL,
    holder      text,
    note        text,
    PRIMARY KEY (kind, lock_key, owner)
);

-- One row per semaphore: its limit and its fencing counter (never deleted).
-- The grant locks this row, so "count live permits, then insert" is serial.
CREATE TABLE IF NOT EXISTS sqlock_semaphores (
    name    text PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 255),
    permits integer NOT NULL CHECK (permits > 0),
    token   bigint NOT NULL
);

-- Shared grant. Readers hold the key's row in sqlock_locks together: owner
-- 'shared', mode 'shared', expires_at at least the latest expiry of every
-- live shared holder. Exclusive grants, select_for_update and the sweeper
-- then treat the key as held without a change to their statements. The
-- upsert decides on the latest version of that row under its row lock, and
-- the holder row commits with it. In a VOLATILE function each statement takes
-- a fresh snapshot (READ COMMITTED), so the steps after the row lock see
-- every grant that committed before it.
-- p_ticket / p_priority as in grant.sql. A reader that is not fair (priority
-- the smallest bigint) yields to every live fair waiter and to every live
-- exclusive waiter that queued before it; a fair reader yields to fair
-- waiters ahead of it (priority, then ticket), readers or writers alike.
CREATE OR REPLACE FUNCTION sqlock_grant_shared(p_key text, p_owner text, p_lease_ms bigint, p_holder text,
                                               p_note text, p_ticket bigint, p_priority bigint,
                                               OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_expires timestamptz := clock_timestamp() + p_lease_ms * interval '1 millisecond';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_key AND w.kind <> 'P' AND w.expires_at > clock_timestamp()
                      AND ((w.fair AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket)))
                        OR (p_priority = -9223372036854775808 AND w.kind = 'X' AND w.ticket < p_ticket))) THEN
        INSERT INTO sqlock_locks AS l (lock_key, owner, mode, expires_at, acquired_at)
        VALUES (p_key, 'shared', 'shared', v_expires, clock_timestamp())
        ON CONFLICT (lock_key) DO UPDATE
           SET owner = 'shared', mode = 'shared', holder = NULL, note = NULL,
               expires_at = CASE WHEN l.owner = 'shared' AND l.mode = 'shared' AND l.expires_at > clock_timestamp()
                                 THEN greatest(l.expires_at, EXCLUDED.expires_at) ELSE EXCLUDED.expires_at END,
               acquired_at = CASE WHEN l.owner = 'shared' AND l.mode = 'shared' AND l.expires_at > clock_timestamp()
                                  THEN l.acquired_at ELSE EXCLUDED.acquired_at END
         WHERE l.owner IS NULL OR l.expires_at <= clock_timestamp() OR (l.owner = 'shared' AND l.mode = 'shared');
        IF FOUND THEN
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, 0) ON CONFLICT (lock_key) DO NOTHING;
            SELECT f.token INTO token FROM sqlock_fences f WHERE f.lock_key = p_key;
            INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_at, acquired_at, holder, note)
            VALUES ('S', p_key, p_owner, token, v_expires, clock_timestamp(), p_holder, p_note);
            DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
            RETURN;
        END IF;
    END IF;
    SELECT greatest(0, ceil(extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000))::bigint
      INTO remaining_ms FROM sqlock_locks l WHERE l.lock_key = p_key AND l.owner IS NOT NULL;
END $$;

-- Shared release: p_key, p_owner. Locks the key's row first (as grants do),
-- then, with a fresh snapshot, lowers its expiry to the latest live shared
-- holder's, or frees it when none is left, and wakes the head waiter.
CREATE OR REPLACE FUNCTION sqlock_release_shared(p_key text, p_owner text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_released boolean;
    v_until    timestamptz;
BEGIN
    PERFORM 1 FROM sqlock_locks WHERE lock_key = p_key FOR UPDATE;
    -- Released: the holder's row was still live (an expired one is deleted all the same).
    DELETE FROM sqlock_holders WHERE kind = 'S' AND lock_key = p_key AND owner = p_owner
    RETURNING expires_at > clock_timestamp() INTO v_released;
    SELECT max(expires_at) INTO v_until FROM sqlock_holders
     WHERE kind = 'S' AND lock_key = p_key AND expires_at > clock_timestamp();
    UPDATE sqlock_locks SET owner = CASE WHEN v_until IS NULL THEN NULL ELSE owner END,
                            expires_at = v_until
     WHERE lock_key = p_key AND owner = 'shared' AND mode = 'shared';
    IF v_until IS NULL THEN
        PERFORM pg_notify(w.listener, w.ticket::text) FROM (
            SELECT listener, ticket FROM sqlock_waiters
             WHERE lock_key = p_key AND kind <> 'P' AND listener IS NOT NULL AND expires_at > clock_timestamp()
             ORDER BY fair DESC, priority DESC, ticket LIMIT 1) AS w;
    END IF;
    RETURN coalesce(v_released, false);
END $$;

-- Permit grant: p_name, p_owner, p_permits (the limit when the semaphore is
-- new; set_permits changes it), lease, holder, note, ticket, priority. The
-- semaphore's row lock serialises grants of one name; the count that follows
-- it runs on a fresh snapshot, so no more than `permits` live permits exist
-- at any instant of database time.
CREATE OR REPLACE FUNCTION sqlock_grant_permit(p_name text, p_owner text, p_permits integer, p_lease_ms bigint,
                                               p_holder text, p_note text, p_ticket bigint, p_priority bigint,
                                               OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_permits integer;
    v_live    bigint;
BEGIN
    INSERT INTO sqlock_semaphores (name, permits, token) VALUES (p_name, p_permits, 0)
    ON CONFLICT (name) DO NOTHING;
    SELECT s.permits INTO v_permits FROM sqlock_semaphores s WHERE s.name = p_name FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_name AND w.kind = 'P' AND w.fair AND w.expires_at > clock_timestamp()
                      AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket))) THEN
        SELECT count(*) INTO v_live FROM sqlock_holders
         WHERE kind = 'P' AND lock_key = p_name AND expires_at > clock_timestamp();
        IF v_live < v_permits THEN
            UPDATE sqlock_semaphores s SET token = s.token + 1 WHERE s.name = p_name RETURNING s.token INTO token;
            INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_at, acquired_at, holder, note)
            VALUES ('P', p_name, p_owner, token, clock_timestamp() + p_lease_ms * interval '1 millisecond',
                    clock_timestamp(), p_holder, p_note);
            DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
            RETURN;
        END IF;
    END IF;
    SELECT greatest(0, ceil(extract(epoch FROM (min(expires_at) - clock_timestamp())) * 1000))::bigint
      INTO remaining_ms FROM sqlock_holders
     WHERE kind = 'P' AND lock_key = p_name AND expires_at > clock_timestamp();
END $$;

INSERT INTO sqlock_schema_version (version, name) VALUES (6, 'shared_and_permits') ON CONFLICT DO NOTHING;
