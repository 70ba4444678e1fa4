-- The listener's connection holds its channel's name for as long as it
-- lives, so a release finds the thread to interrupt with IS_USED_LOCK(? the
-- channel) (migrations/mysql/0010_doorbell_lock.sql). Never waits: the
-- name is the client's own.
SELECT GET_LOCK(?, 0)
