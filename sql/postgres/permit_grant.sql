-- Permit grant: $1 semaphore name, $2 owner, $3 permits (when new), $4 lease
-- ms, $5 holder, $6 note, $7 ticket, $8 priority. See sqlock_grant_permit in
-- migrations/postgres/0006_shared_and_permits.sql.
SELECT token, remaining_ms
  FROM sqlock_grant_permit($1, $2, $3::integer, $4::bigint, $5, $6, $7::bigint, $8::bigint)
