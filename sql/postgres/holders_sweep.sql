-- Deletes up to $1 expired shared-holder and permit rows. An expired row
-- counts nowhere already (grants count live rows only), so deleting it
-- changes nothing but the table's size.
DELETE FROM sqlock_holders
 WHERE (kind, lock_key, owner) IN (SELECT kind, lock_key, owner FROM sqlock_holders
                                    WHERE expires_at <= clock_timestamp() LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND expires_at <= clock_timestamp()
