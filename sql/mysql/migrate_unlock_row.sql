-- Galera: ? owner. Frees the migration lock row this migrator holds.
DELETE FROM sqlock_migrate_lock WHERE id = 1 AND owner = ?
