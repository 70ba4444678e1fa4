-- The listener arms at a new ring count (migrations/mysql/0016_one_interrupt_per_sleep.sql):
-- ? channel, ? the count it slept at until now (a name it may not hold: 0),
-- ? channel, ? the count it sleeps at from now on. A statement of its own,
-- before the one that reads the count: a release that finds no holder of the
-- new name committed its count before this statement, so the next one sees it.
SELECT RELEASE_LOCK(sqlock_armed(?, ?)), GET_LOCK(sqlock_armed(?, ?), 0)
