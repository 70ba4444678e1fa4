-- Schema version 15 for PostgreSQL: the reader's grant and the renewal of
-- a lease lock the key's row before they judge its expiry (MariaDB's
-- renewal too: migrations/mysql/0015_lock_then_judge.sql).
-- For a custom table prefix, replace every "sqlock_" first.
--
-- An UPDATE that waits for a row another transaction only locked (FOR SHARE
-- or FOR UPDATE, or an ON CONFLICT whose WHERE failed) goes ahead once that
-- lock ends without checking its WHERE again: PostgreSQL re-checks only a
-- row that was changed. Its clock_timestamp() was read before the wait. So a
-- renewal that found the lease live, then waited past its expiry (behind a
-- select_for_update holder's row lock, an inspection, a losing grant or a
-- client stalled behind a transaction pool), renewed the expired lease; and
-- a reader that found its group live joined it after it had expired, with
-- the group's old token (found by a review; tests in the safety suite). Both
-- now take the row lock first, in a statement of its own, and judge in the
-- next one, on a fresh snapshot and clock. And the last reader's release
-- rings no waiter whose channel is '' (below).

-- The reader's grant of version 9 (migrations/postgres/0009_reader_epochs.sql),
-- the key's row locked first.
CREATE OR REPLACE FUNCTION sqlock_grant_shared(p_key text, p_owner text, p_lease_ms bigint, p_holder text,
                                               p_note text, p_ticket bigint, p_priority bigint,
                                               OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_expires timestamptz;
    v_started boolean;
BEGIN
    -- The key's row first, then the clock: every statement below judges the
    -- group's expiry on a snapshot and a clock taken after any wait for it.
    PERFORM 1 FROM sqlock_locks WHERE lock_key = p_key FOR UPDATE;
    v_expires := clock_timestamp() + p_lease_ms * interval '1 millisecond';
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_key AND w.kind <> 'P' AND w.expires_at > clock_timestamp()
                      AND ((w.fair AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket)))
                        OR (p_priority = -9223372036854775808 AND w.kind = 'X' AND w.ticket < p_ticket))) THEN
        UPDATE sqlock_locks l SET expires_at = greatest(l.expires_at, v_expires)
         WHERE l.lock_key = p_key AND l.owner = 'shared' AND l.mode = 'shared' AND l.expires_at > clock_timestamp();
        IF FOUND THEN
            v_started := false;
        ELSE
            INSERT INTO sqlock_locks AS l (lock_key, owner, mode, expires_at, acquired_at)
            VALUES (p_key, 'shared', 'shared', v_expires, clock_timestamp())
            ON CONFLICT (lock_key) DO UPDATE
               SET owner = 'shared', mode = 'shared', holder = NULL, note = NULL,
                   expires_at = EXCLUDED.expires_at, acquired_at = EXCLUDED.acquired_at
             WHERE l.owner IS NULL OR l.expires_at <= clock_timestamp();
            IF FOUND THEN
                v_started := true;
            ELSE
                UPDATE sqlock_locks l SET expires_at = greatest(l.expires_at, v_expires)
                 WHERE l.lock_key = p_key AND l.owner = 'shared' AND l.mode = 'shared'
                   AND l.expires_at > clock_timestamp();
                IF FOUND THEN v_started := false; END IF;
            END IF;
        END IF;
        IF v_started IS NOT NULL THEN
            IF v_started THEN
                -- A new group of readers: a new token, after exclusion, as for a writer.
                INSERT INTO sqlock_fences AS f (lock_key, token) VALUES (p_key, 1)
                ON CONFLICT (lock_key) DO UPDATE SET token = f.token + 1
                RETURNING f.token INTO token;
            ELSE
                SELECT f.token INTO token FROM sqlock_fences f WHERE f.lock_key = p_key;
            END IF;
            INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_at, acquired_at, holder, note)
            VALUES ('S', p_key, p_owner, token, v_expires, clock_timestamp(), p_holder, p_note);
            DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
            RETURN;
        END IF;
    END IF;
    SELECT greatest(0, ceil(extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000))::bigint
      INTO remaining_ms FROM sqlock_locks l WHERE l.lock_key = p_key AND l.owner IS NOT NULL;
END $$;

-- A lease's renewal (sql/postgres/renew.sql): true when p_owner's lease of
-- p_key was live once its row was locked, and is renewed by p_lease_ms.
CREATE OR REPLACE FUNCTION sqlock_renew(p_key text, p_owner text, p_lease_ms bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM sqlock_locks WHERE lock_key = p_key AND owner = p_owner FOR UPDATE;
    UPDATE sqlock_locks SET expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
     WHERE lock_key = p_key AND owner = p_owner AND expires_at > clock_timestamp();
    RETURN FOUND;
END $$;

-- The last reader's release of version 6 (migrations/postgres/0006_shared_and_permits.sql),
-- ringing no waiter whose channel is '': a library before this version
-- stored '' for a pooled client's reader or permit waiter, and pg_notify('')
-- failed the release (sql/postgres/holder_enqueue.sql).
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
             WHERE lock_key = p_key AND kind <> 'P' AND listener <> '' AND expires_at > clock_timestamp()
             ORDER BY fair DESC, priority DESC, ticket LIMIT 1) AS w;
    END IF;
    RETURN coalesce(v_released, false);
END $$;

INSERT INTO sqlock_schema_version (version, name) VALUES (15, 'lock_then_judge') ON CONFLICT DO NOTHING;
