-- Galera only: reads wait until this node has applied every write committed
-- anywhere in the cluster before they started (causal reads), so a fence
-- check or an inspect on one node sees a grant made on another.
-- https://mariadb.com/kb/en/galera-cluster-system-variables/#wsrep_sync_wait
SET SESSION wsrep_sync_wait = 1
