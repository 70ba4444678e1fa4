SELECT coalesce(max(version), 0) FROM sqlock_schema_version
