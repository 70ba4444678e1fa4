-- MySQL DDL commits implicitly, so concurrent migrate() calls serialise on a
-- named session lock instead of a transaction. Never waits in the server:
-- migrate() polls it (see mysql.cpp).
SELECT GET_LOCK('sqlock_migrate', 0)
