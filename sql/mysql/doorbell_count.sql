-- The rings counted so far on ? the listener's channel: where its next wait
-- starts from.
SELECT rung FROM sqlock_rings WHERE channel = ?
