-- Deletes up to ? ring counts of listeners that are gone: no connection holds
-- the channel's name, and no ring or reconnect touched the row for an hour
-- (a listener holds the name again before it touches its row).
DELETE FROM sqlock_rings
 WHERE touched_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR AND IS_USED_LOCK(channel) IS NULL
 LIMIT ?
