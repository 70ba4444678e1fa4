SELECT token FROM sqlock_fences WHERE lock_key = ?
