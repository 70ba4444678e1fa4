SELECT RELEASE_LOCK('sqlock_migrate')
