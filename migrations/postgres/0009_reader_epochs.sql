-- Schema version 9 for PostgreSQL: each group of readers gets a fencing token
-- of its own. For a custom table prefix, replace every "sqlock_" first.
--
-- Before, a shared grant handed out the key's current token (the last
-- writer's) and never bumped the counter, and a fence checks only that the
-- counter still equals the lease's token and that the key's row is live. So
-- a writer whose lease had run out, with readers holding the key since,
-- still passed its fence: its write committed beside theirs (found by the
-- fault campaign's reader-writer check, docs/reliability.md). Now a shared
-- grant that starts a group of readers (the key free, expired or never
-- granted) bumps the counter, as an exclusive grant does; readers that join
-- a live group take its token. Tokens strictly increase along the key's
-- history of writers and reader groups, so the old writer's fence fails.

-- Shared grant: as in version 6 (migrations/postgres/0006_shared_and_permits.sql),
-- but in two steps that say whether it joined a live group or started one.
-- Joining updates only that group's expiry; starting takes a free, expired
-- or missing row. Between the two another reader may have started a group
-- (the start then finds the row live and changes nothing): join it then.
CREATE OR REPLACE FUNCTION sqlock_grant_shared(p_key text, p_owner text, p_lease_ms bigint, p_holder text,
                                               p_note text, p_ticket bigint, p_priority bigint,
                                               OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_expires timestamptz := clock_timestamp() + p_lease_ms * interval '1 millisecond';
    v_started boolean;
BEGIN
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

-- Groups of readers live at the upgrade hold the last writer's token: give
-- each such key a new one, so that the writer's fence fails from now on (the
-- readers' fences fail too until they are granted again: the safe side).
UPDATE sqlock_fences f SET token = f.token + 1
  FROM sqlock_locks l
 WHERE l.lock_key = f.lock_key AND l.owner = 'shared' AND l.mode = 'shared' AND l.expires_at > clock_timestamp();

INSERT INTO sqlock_schema_version (version, name) VALUES (9, 'reader_epochs') ON CONFLICT DO NOTHING;
