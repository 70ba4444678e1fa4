-- 1 on a Galera node (wsrep_on), 0 elsewhere. MySQL has no such variable
-- (error 1193): mysql.cpp reads that as 0.
SELECT @@wsrep_on
