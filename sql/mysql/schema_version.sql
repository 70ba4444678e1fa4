-- The version the schema is complete up to: the highest N with every
-- migration 1..N recorded (0: none, or not the first). Not the highest
-- recorded: applied by hand, a loop that went on past a failed file (one
-- that lacked a privilege, say) recorded the later ones, and the schema
-- passed for complete with a migration missing, which migrate() then never
-- applied, as it applies only versions above this one. Each file is
-- idempotent, so migrate() applies the rest again from the gap.
SELECT CASE WHEN EXISTS (SELECT 1 FROM sqlock_schema_version WHERE version = 1)
            THEN (SELECT MIN(a.version) FROM sqlock_schema_version a
                   WHERE NOT EXISTS (SELECT 1 FROM sqlock_schema_version b WHERE b.version = a.version + 1))
            ELSE 0 END
