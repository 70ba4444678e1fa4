SELECT to_regclass('sqlock_schema_version') IS NOT NULL
