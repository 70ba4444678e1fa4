-- Galera: GET_LOCK is node-local (the same name is granted on two nodes at
-- once), so concurrent migrate() calls on a cluster serialise on this row
-- instead. Created before any migration runs; DDL replicates to every node.
CREATE TABLE IF NOT EXISTS sqlock_migrate_lock (
    id         TINYINT NOT NULL PRIMARY KEY,
    owner      VARCHAR(64) NOT NULL,
    expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB
