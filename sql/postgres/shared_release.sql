-- Shared release: $1 key, $2 owner. True when the holder's lease was live.
SELECT sqlock_release_shared($1, $2)
