-- Shared release: ? key, ? owner. One row: 1 when the holder's lease was live.
CALL sqlock_release_shared(?, ?)
