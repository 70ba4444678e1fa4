-- Galera: ? owner. 1 when the migration lock row is this migrator's.
SELECT COUNT(*) FROM sqlock_migrate_lock WHERE id = 1 AND owner = ?
