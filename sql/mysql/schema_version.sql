SELECT COALESCE(MAX(version), 0) FROM sqlock_schema_version
