-- The listener's ring count (migrations/mysql/0013_ring_counts.sql): ? its
-- channel. Made when the listener connects, after it holds the channel's
-- name; a listener that reconnects keeps its count and touches the row.
INSERT INTO sqlock_rings (channel, rung, touched_at) VALUES (?, 0, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE touched_at = VALUES(touched_at)
