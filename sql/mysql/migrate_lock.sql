-- MySQL DDL commits implicitly, so concurrent migrate() calls serialise on a
-- named session lock instead of a transaction. ? seconds to wait.
SELECT GET_LOCK('sqlock_migrate', ?)
