#pragma once
// Fault injection points for the test suite: places where a real fault is
// possible but cannot be timed from outside (a connection that dies right
// after the server committed, another writer slipping in between two
// statements). Without a hook installed each point is one relaxed atomic
// load. Only tests install hooks.

#include <functional>

namespace sqlock::detail {

enum class fault_point {
    fenced_commit_done,        // a fenced transaction (job claim or outcome) just committed
    sqlite_grant_written,      // SQLite: a queued waiter's grant statement granted, its ticket not yet removed
    sqlite_shared_granted,     // SQLite: a reader's grant took the key's row, its own row not yet written
    mysql_force_expired,       // MySQL: force_release expired the key's row, not yet its readers' rows
    mysql_force_unleaned,      // MySQL: force_release cleared the lean flag, its transaction not yet begun
    grant_answered,            // a grant (exclusive, reader or permit) came back from its first run on a session
    force_release_answered,    // force_release came back from the database
    release_sending,           // a lease's release (not select_for_update's) is about to be sent
    job_claimed,               // a job runner's claim came back, before its body starts
    row_lock_bumped,           // a select_for_update grant bumped the fence, not yet read back in its held transaction
    renewal_confirmed,         // a renewal's answer was taken (not late, not lost), its on_renewed not yet posted
    renewing_alone,            // the watchdog renews one lease by itself (the batch did not renew it), not yet sent
};

// The hook runs on the thread that reached the point and may throw (e.g. a
// connection_error, as if the connection had died right there).
using fault_hook = std::function<void(fault_point)>;
void set_fault_hook_for_testing(fault_hook hook);

// Calls the hook, if any, for point p.
void fault(fault_point p);

// A deliberately broken lease mode, for the fault campaign's negative control
// (scripts/faults.sh): once called, SQLite's database clock (<prefix>now_ms(),
// which every expiry comparison reads) becomes this process's libc
// CLOCK_REALTIME, which faketime skews, instead of the host's clock read by
// system call. Leases are then compared with a client clock, the mistake the
// design forbids; the campaign shows its checker catches what follows.
void use_client_clock_for_testing();
bool using_client_clock_for_testing();

}  // namespace sqlock::detail
