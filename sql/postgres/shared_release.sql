-- Shared release: $1 key, $2 owner. True when the holder's lease was live.
-- The commit does not wait for the disk, as in release_delete.sql.
SELECT sqlock_release_shared($1, $2) FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
