-- READ COMMITTED: no gap locks on missing keys, so inserts of new keys do not
-- deadlock each other.
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED
