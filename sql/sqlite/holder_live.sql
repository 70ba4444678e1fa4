-- Whether a holder's lease is live: ?1 kind, ?2 key, ?3 owner. As the
-- renewal judges it (holders_renew.sql): a reader only while its key's row is
-- its group's. (A reader not renewed but live here would be taken for one
-- whose key's row was locked, and its renewal retried until its deadline.)
SELECT count(*) FROM sqlock_holders h
 WHERE h.kind = ?1 AND h.lock_key = ?2 AND h.owner = ?3 AND h.expires_ms > sqlock_now_ms()
   AND (h.kind = 'P' OR EXISTS (SELECT 1 FROM sqlock_locks l
                                 WHERE l.lock_key = h.lock_key AND l.owner = 'shared' AND l.mode = 'shared'
                                   AND l.expires_ms > sqlock_now_ms() AND l.token = h.token))
