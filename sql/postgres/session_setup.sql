-- Run once per connection. $1 row lock timeout ms, $2 statement timeout ms.
SELECT set_config('lock_timeout', $1 || 'ms', false),
       set_config('statement_timeout', $2 || 'ms', false)
