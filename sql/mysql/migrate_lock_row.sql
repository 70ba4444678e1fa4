-- Galera: ? owner. Takes the migration lock row when it is free or its
-- holder's ten minutes are over (a migrator that died). Two nodes taking it
-- at once: one commit wins certification, the other fails (1213 or 1062)
-- and migrate() tries again. Whether it is ours: migrate_lock_owner.sql.
INSERT INTO sqlock_migrate_lock (id, owner, expires_at) VALUES (1, ?, UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE)
ON DUPLICATE KEY UPDATE
    owner      = IF(expires_at < UTC_TIMESTAMP(6), VALUES(owner), owner),
    expires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at)
