// Leases under faults: a holder frozen past its lease, connections killed
// under a holder, the database restarted or stopped while leases are held,
// and sweepers in several processes while leases churn. The "fault" suite
// stops, restarts and kills server connections (ctest runs it under the
// server's resource lock); the "process" suite only uses worker processes.

#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sqlock::mode;

namespace {

constexpr mode lease_modes[] = {mode::unique_insert, mode::conditional_update};




// The integer after `prefix` in `line` ("token 17" -> 17); -1 when absent.
std::int64_t number_after(const std::string& line, const std::string& prefix) {
    if (line.rfind(prefix, 0) != 0) return -1;
    try {
        return std::stoll(line.substr(prefix.size()));
    } catch (const std::exception&) {
        return -1;
    }
}

// Polls until pred() or the timeout; returns pred().

// True once the process is in the stopped state ('T' in /proc/PID/stat).
bool is_stopped(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');  // the command name may hold spaces
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

// SQLite only: whether some connection holds the database's write lock.
bool sqlite_write_locked(test::raw_connection& raw) {
    raw.exec("PRAGMA busy_timeout = 0");
    try {
        raw.exec("BEGIN IMMEDIATE");
    } catch (const std::exception&) {
        return true;  // SQLITE_BUSY
    }
    raw.exec("ROLLBACK");
    return false;
}

// SQL giving a column of the key's lock row as a number on the database's
// own clock (microseconds), so that two such values compare by database
// time. what: "expires" or "acquired". Servers only.
std::string db_time_sql(const test::backend_base& db, const std::string& what, const std::string& key) {
    const std::string where = " FROM " + db.table("locks") + " WHERE lock_key = '" + key + "'";
    if (db.name() == "postgres")
        return "SELECT floor(extract(epoch FROM " + what + "_at) * 1000000)::bigint" + where;
    // Pure DATETIME arithmetic: no session time zone is involved.
    return "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + what + "_at)" + where;
}

// A client of the test database whose connections the test can find and kill
// without touching anyone else's: on PostgreSQL it carries its own
// application_name; on MariaDB it logs in as the `sqlock` user, which no
// other client of the test uses.
struct victim {
    std::string url;
    std::string next_id_sql;  // smallest connection id above the number appended
    std::string kill_prefix;  // + id + kill_suffix kills that connection
    std::string kill_suffix;
    std::string alive_sql;    // + id + ")" counts that connection (0 once it is gone)
    std::string idle_tx_sql;  // the id of its connection with a transaction open and idle
    std::string waiting_sql;  // how many of its statements wait for a row lock

    explicit victim(const test::backend_base& db) {
        if (db.name() == "postgres") {
            const std::string app = "sqlock_victim_" + test::random_hex(10);
            url = db.url() + (db.url().find('?') == std::string::npos ? "?" : "&") + "application_name=" + app;
            next_id_sql = "SELECT min(pid) FROM pg_stat_activity WHERE datname = current_database()"
                          " AND application_name = '" + app + "' AND pid > ";
            kill_prefix = "SELECT pg_terminate_backend(";
            kill_suffix = ")::int";
            alive_sql = "SELECT count(*) FROM pg_stat_activity WHERE pid IN (";
            const std::string mine =
                "FROM pg_stat_activity WHERE datname = current_database() AND application_name = '" + app + "'";
            idle_tx_sql = "SELECT min(pid) " + mine + " AND state = 'idle in transaction'";
            waiting_sql = "SELECT count(*) " + mine + " AND wait_event_type = 'Lock'";
        } else {
            const std::string root = "mysql://root@";
            REQUIRE(db.url().rfind(root, 0) == 0);
            url = "mysql://sqlock:s3cr3t-pw@" + db.url().substr(root.size());
            next_id_sql = "SELECT min(ID) FROM information_schema.processlist WHERE USER = 'sqlock' AND ID > ";
            kill_prefix = "KILL ";
            alive_sql = "SELECT count(*) FROM information_schema.processlist WHERE ID IN (";
            const std::string mine = "FROM information_schema.innodb_trx t JOIN information_schema.processlist p"
                                     " ON p.ID = t.trx_mysql_thread_id WHERE p.USER = 'sqlock'";
            idle_tx_sql =
                "SELECT min(t.trx_mysql_thread_id) " + mine + " AND t.trx_state = 'RUNNING' AND p.COMMAND = 'Sleep'";
            waiting_sql = "SELECT count(*) " + mine + " AND t.trx_state = 'LOCK WAIT'";
        }
    }

    // Kills one connection and waits until the server has dropped it.
    void kill(test::raw_connection& raw, std::int64_t id) const {
        const std::string kill = kill_prefix + std::to_string(id) + kill_suffix;
        if (kill_suffix.empty()) raw.exec(kill);
        else raw.scalar(kill);
        CHECK(test::eventually([&] { return raw.scalar(alive_sql + std::to_string(id) + ")") == 0; }));
    }

    // Kills every connection the victim has open now and waits until the
    // server has dropped them. Returns how many there were.
    std::size_t kill_all(test::raw_connection& raw) const {
        std::vector<std::int64_t> ids;
        for (std::int64_t id = 0; (id = raw.scalar(next_id_sql + std::to_string(id))) > 0;) ids.push_back(id);
        std::string list;
        for (auto id : ids) {
            const std::string kill = kill_prefix + std::to_string(id) + kill_suffix;
            try {
                if (kill_suffix.empty()) raw.exec(kill);
                else raw.scalar(kill);
            } catch (const std::exception&) {
                // MariaDB: "unknown thread id", the connection closed by itself meanwhile.
            }
            list += (list.empty() ? "" : ",") + std::to_string(id);
        }
        if (!ids.empty()) {
            const std::string alive = alive_sql + list + ")";
            CHECK(test::eventually([&] { return raw.scalar(alive) == 0; }));
        }
        return ids.size();
    }

    std::int64_t connections(test::raw_connection& raw) const {
        std::int64_t n = 0;
        for (std::int64_t id = 0; (id = raw.scalar(next_id_sql + std::to_string(id))) > 0;) ++n;
        return n;
    }
};

// A worker holds the key with auto-renewal and a short lease and is frozen
// with SIGSTOP (its watchdog too): the key goes to the parent once the lease
// runs out (for select_for_update: once the server's idle-in-transaction
// limit ends the frozen transaction), and the worker, continued, learns at
// once that its lease is lost.
template <class Db>
void check_frozen_holder(mode m) {
    Db db;
    auto c = db.open_quiet();  // no sweeper of ours writing during the SQLite check below
    const std::string key = std::string("lease-fault/frozen/") + sqlock::to_string(m);

    test::child holder({test::worker_path(), "frozen", db.url(), db.prefix, key, sqlock::to_string(m), "1500"});
    const std::string first = test::line_or_eof(holder.read_line(30s));
    const std::int64_t old_token = number_after(first, "token ");
    REQUIRE_MESSAGE(old_token > 0, first);
    holder.signal(SIGSTOP);
    REQUIRE(test::eventually([&] { return is_stopped(holder.pid()); }, 5s));
    if (db.name() == "sqlite") {
        // A process frozen inside a write statement keeps SQLite's write lock,
        // which blocks every writer of the file (no server can end it). The
        // holder was stopped right after its grant, when no renewal was due
        // for a third of a lease: it must not be writing.
        auto raw = db.raw();
        REQUIRE_MESSAGE(!sqlite_write_locked(*raw),
                        "the holder was frozen inside a write statement right after its grant: a renewal that "
                        "was not due yet?");
    }

    // The idle limit is the lease, rounded up to whole seconds on MariaDB.
    auto mine = c.acquire(key, 15s, {.mode = m, .lease = 30s});
    CHECK(mine.token() > old_token);

    holder.signal(SIGCONT);
    CHECK(test::line_or_eof(holder.read_line(30s)) == "check threw");
    CHECK(test::line_or_eof(holder.read_line(30s)) == "renew 0");
    CHECK(holder.wait(30s) == 0);

    // Waking up (and exiting, which releases its lease) did nothing to ours.
    CHECK_FALSE(mine.lost());
    const auto info = c.inspect(key);
    CHECK(info.held);
    CHECK(info.token == mine.token());
    if (m == mode::select_for_update) CHECK(info.mode == "select_for_update");
    else CHECK(info.owner == mine.owner());
    CHECK(mine.renew());
}

// A holder whose every connection is killed, twice, keeps its lease: the
// watchdog reconnects and renews before the local deadline.
template <class Db>
void check_killed_connections_of_lease_holder(mode m) {
    Db db;
    auto raw = db.raw();
    const victim v(db);
    auto holder = sqlock::client::open(v.url, db.options());
    auto other = db.open();
    const std::string key = std::string("lease-fault/killed/") + sqlock::to_string(m);
    constexpr auto lease_len = 3s;

    auto held = holder.try_acquire(key, {.mode = m, .lease = lease_len, .renew_interval = 300ms});
    REQUIRE(held);
    std::uint64_t renewals = holder.stats().renewals;
    for (int round = 0; round < 2; ++round) {
        CAPTURE(round);
        CHECK(v.kill_all(*raw) >= 1);
        std::this_thread::sleep_for(lease_len);
        // A whole lease length after the kill: without a renewal on a new
        // connection meanwhile, the lease would be lost by now.
        CHECK_FALSE(held->lost());
        CHECK(holder.stats().renewals > renewals);
        renewals = holder.stats().renewals;
        CHECK_FALSE(other.try_acquire(key, {.mode = m}));
        CHECK(other.inspect(key).owner == held->owner());
        CHECK(v.connections(*raw) >= 1);  // reconnected
    }
    CHECK(holder.stats().leases_lost == 0);
    CHECK(held->renew());
}

}  // namespace

TEST_SUITE("process") {

TEST_CASE_TEMPLATE("a unique_insert holder frozen past its lease loses the key and learns it when it wakes", Db,
                   ALL_BACKENDS) {
    check_frozen_holder<Db>(mode::unique_insert);
}

TEST_CASE_TEMPLATE("a conditional_update holder frozen past its lease loses the key and learns it when it wakes", Db,
                   ALL_BACKENDS) {
    check_frozen_holder<Db>(mode::conditional_update);
}

TEST_CASE_TEMPLATE(
    "a select_for_update holder frozen past the server's idle limit loses the key and learns it when it wakes", Db,
    SERVER_BACKENDS) {
    check_frozen_holder<Db>(mode::select_for_update);
}

TEST_CASE_TEMPLATE("a process frozen in the middle of acquiring does not keep the key past its lease", Db,
                   SERVER_BACKENDS) {
    Db db;
    auto c = db.open();
    auto raw = db.raw();
    const std::string key = "lease-fault/frozen-while-acquiring";

    test::child looper({test::worker_path(), "grant-loop", db.url(), db.prefix, key, "1000"});
    REQUIRE(test::line_or_eof(looper.read_line(30s)) == "looping");
    looper.signal(SIGSTOP);
    REQUIRE(test::eventually([&] { return is_stopped(looper.pid()); }, 5s));
    // Both servers grant in one round trip (PostgreSQL: one statement;
    // MySQL: one CALL of a procedure), which the server finishes without the
    // client, so a freeze can leave no grant transaction open.

    // Whatever the looper was doing, its lease (1 s) and any transaction it
    // left open must not keep the key from us while it stays frozen.
    std::optional<sqlock::lease> mine;
    CHECK_NOTHROW((void)mine.emplace(c.acquire(key, 15s)));
    if (mine) CHECK(mine->token() > 0);
    CHECK(is_stopped(looper.pid()));
}

TEST_CASE_TEMPLATE("sweepers in four processes delete only expired rows while leases churn", Db, ALL_BACKENDS) {
    constexpr int workers = 4;
    constexpr int iterations = 100;
    constexpr int junk_per_iteration = 3;  // see `churn` in worker.cpp
    Db db;
    test::temp_dir dir;
    const std::string file = (dir.path / "counter").string();
    { std::ofstream(file) << 0 << "\n"; }
    const std::string key = "lease-fault/churn";

    std::vector<test::child> children;
    for (int i = 0; i < workers; ++i)
        children.emplace_back(std::vector<std::string>{test::worker_path(), "churn", db.url(), db.prefix, key,
                                                       std::to_string(iterations), file});
    std::int64_t swept = 0, tickets = 0;
    for (auto& c : children) {
        CHECK(test::line_or_eof(c.read_line(120s)) == "done " + std::to_string(iterations));
        const std::string line = test::line_or_eof(c.read_line(30s));
        const std::int64_t n = number_after(line, "swept ");
        CHECK_MESSAGE(n >= 0, line);
        swept += n;
        const std::string queued = test::line_or_eof(c.read_line(30s));
        const std::int64_t t = number_after(queued, "tickets ");
        CHECK_MESSAGE(t >= 0, queued);
        tickets += t;
        CHECK(c.wait() == 0);
    }
    CHECK(swept > 0);

    // A sweeper that deleted a live row would have let two holders overlap
    // and lose an update.
    const auto [count, tokens, owners] = test::read_counter_history(file);
    CHECK(count == workers * iterations);
    REQUIRE(tokens.size() == static_cast<std::size_t>(workers * iterations));
    CHECK(owners.size() == tokens.size());
    CHECK(tokens.front() > 0);
    std::size_t out_of_order = 0;
    for (std::size_t i = 1; i < tokens.size(); ++i)
        if (tokens[i] <= tokens[i - 1]) ++out_of_order;
    CHECK(out_of_order == 0);

    // The sweepers kept up: each worker lingers for a junk lease and two
    // sweep intervals before it exits, so at most what the last sweeps
    // missed is left.
    auto raw = db.raw();
    const std::string junk_rows = "SELECT count(*) FROM " + db.table("locks") + " WHERE lock_key LIKE 'junk/%'";
    const std::int64_t created = workers * iterations * junk_per_iteration;
    const std::int64_t left = raw->scalar(junk_rows);
    MESSAGE("junk rows left by the workers: " << left << " of " << created << "; swept by them: " << swept);
    // (<=: a worker's sweeper may delete a row after it printed its count.
    // Waiter rows of tickets whose heartbeat came too late count as swept too.)
    CHECK(swept + left <= created + tickets);
    CHECK(left * 10 < created);

    // A final sweep removes the rest (all of it has expired by now), and no
    // unique_insert row remains: the workers released the churned key.
    std::this_thread::sleep_for(100ms);
    auto c = db.open_quiet();
    std::size_t final_sweep = 0;
    for (std::size_t n; (n = c.sweep()) > 0;) final_sweep += n;
    CHECK(static_cast<std::int64_t>(final_sweep) == left);
    CHECK(raw->scalar(junk_rows) == 0);
    CHECK(raw->scalar("SELECT count(*) FROM " + db.table("locks") + " WHERE mode = 'unique_insert'") == 0);
    CHECK(c.inspect(key).token == tokens.back());
}

}  // TEST_SUITE("process")

TEST_SUITE("fault") {

TEST_CASE_TEMPLATE("a unique_insert holder whose connections are all killed keeps its lease", Db, SERVER_BACKENDS) {
    check_killed_connections_of_lease_holder<Db>(mode::unique_insert);
}

TEST_CASE_TEMPLATE("a conditional_update holder whose connections are all killed keeps its lease", Db,
                   SERVER_BACKENDS) {
    check_killed_connections_of_lease_holder<Db>(mode::conditional_update);
}

TEST_CASE_TEMPLATE("the watchdog reports a select_for_update lease lost soon after its connection is killed", Db,
                   SERVER_BACKENDS) {
    Db db;
    auto raw = db.raw();
    const victim v(db);
    auto holder = sqlock::client::open(v.url, db.options());
    auto other = db.open();
    const std::string key = "lease-fault/killed/select_for_update";
    std::atomic<int> lost_calls{0};

    // A long lease: the local deadline (9 s) is far behind the ping that
    // notices the dead connection (at most a second apart).
    auto held = holder.try_acquire(key, {.mode = mode::select_for_update,
                                         .lease = 10s,
                                         .on_lost = [&](const std::string&, std::int64_t) { ++lost_calls; }});
    REQUIRE(held);
    REQUIRE(test::eventually([&] { return holder.stats().renewals >= 1; }, 5s));  // pinged while alive
    const auto stop = held->stop_token();

    REQUIRE(v.kill_all(*raw) >= 1);
    // No renew() call: the watchdog alone notices, well before the deadline.
    REQUIRE(test::eventually([&] { return lost_calls.load() == 1; }, 5s));
    CHECK(held->lost());
    CHECK(stop.stop_requested());
    CHECK(holder.stats().leases_lost == 1);

    auto next = other.acquire(key, 10s, {.mode = mode::select_for_update});
    CHECK(next.token() > held->token());
    std::this_thread::sleep_for(300ms);
    CHECK(lost_calls.load() == 1);
}

// The fence bump of a select_for_update grant runs on a second connection,
// after the row lock was taken. If the held transaction ends in between (here
// killed; in life also a server restart, or its idle limit passing while the
// bump waits for a pooled connection), another client can take the key, and
// the bump's token, larger than that client's, would pass the fence over it.
// The grant reads the token back in the held transaction and is refused when
// that transaction is gone. Before, it was handed out as a lease.
TEST_CASE_TEMPLATE("a select_for_update attempt whose row lock ends before its fence bump is not granted", Db,
                   SERVER_BACKENDS) {
    Db db;
    auto raw = db.raw();
    const victim v(db);
    auto o = db.options();
    o.row_lock_timeout = 30s;  // the bump waits for the fence row the test holds, not 200 ms
    auto holder = sqlock::client::open(v.url, o);
    auto other = db.open();
    const std::string key = "lease-fault/bump-after-row-lock";
    const auto sfu = mode::select_for_update;
    const std::int64_t before = other.acquire(key, 10s, {.mode = sfu}).token();  // the key's rows exist

    // The test holds the key's fence row: the holder's bump waits for it.
    // (Watched from another connection: PostgreSQL's activity view is read
    // once per transaction.)
    auto fence_row = db.raw();
    fence_row->begin();
    fence_row->scalar("SELECT token FROM " + db.table("fences") + " WHERE lock_key = '" + key + "' FOR UPDATE");
    std::optional<sqlock::lease> got;
    std::string failed;
    std::thread attempt([&] {
        try {
            got = holder.try_acquire(key, {.mode = sfu});
        } catch (const std::exception& e) {
            failed = e.what();
        }
    });
    const bool bump_waits = test::eventually(
        [&] {
            // MariaDB refreshes innodb_trx only when it was last read 0.1 s
            // ago or more: polled faster, it never changes.
            std::this_thread::sleep_for(150ms);
            return raw->scalar(v.waiting_sql) >= 1;
        },
        20s);
    const std::int64_t held_tx = bump_waits ? raw->scalar(v.idle_tx_sql) : 0;
    if (held_tx > 0) v.kill(*raw, held_tx);  // the row lock ends with the connection
    fence_row->commit();                     // the bump goes ahead
    attempt.join();
    REQUIRE(bump_waits);
    REQUIRE(held_tx > 0);
    CHECK(failed.empty());
    CHECK_FALSE(got);  // not a lease without its row lock

    // The key was free all along after the kill: another client takes it,
    // with a token above the one the refused attempt drew.
    auto next = other.acquire(key, 10s, {.mode = mode::conditional_update});
    CHECK(next.token() > before + 1);
}

// The same gap the other way round: the held transaction ends while the
// fence bump waits for a pooled connection, and another client is granted
// the key meanwhile, with the next token. A bump that then still ran made
// the counter pass that holder's token: its fences all failed while its
// lease stayed live, and nobody else could take the key. The bump now
// starts only from the counter the held transaction read once the row was
// locked, and is refused when it moved. Before, the fence row ended at the
// holder's token + 1.
TEST_CASE_TEMPLATE("a select_for_update attempt whose row lock ends while its fence bump waits draws no token over "
                   "the next holder's",
                   Db, SERVER_BACKENDS) {
    Db db;
    auto raw = db.raw();
    const victim v(db);
    auto o = db.options();
    o.row_lock_timeout = 30s;  // the pool's one session waits for the row the test holds
    o.pool_size = 1;           // so the bump, which needs a pooled session, waits behind it
    auto holder = sqlock::client::open(v.url, o);
    auto other = db.open();
    const std::string key = "lease-fault/bump-waits-for-pool", blocker = "lease-fault/pool-blocker";
    const auto sfu = mode::select_for_update;
    holder.acquire(key, 10s, {.mode = sfu}).release();  // the schema read, the key's rows, the pinning
    holder.acquire(blocker, 10s).release();

    // The pool's only session waits for the blocker's lock row, which the test locks.
    auto row = db.raw();
    row->begin();
    row->scalar("SELECT 1 FROM " + db.table("locks") + " WHERE lock_key = '" + blocker + "' FOR UPDATE");
    std::thread occupy([&] {
        try {
            (void)holder.try_acquire(blocker);
        } catch (const std::exception&) {
        }
    });
    REQUIRE(test::eventually(
        [&] {
            std::this_thread::sleep_for(150ms);  // MariaDB refreshes innodb_trx at most every 0.1 s
            return raw->scalar(v.waiting_sql) >= 1;
        },
        20s));
    // The attempt locks the key's row on its own pinned connection, then
    // waits for the pool for its bump.
    std::optional<sqlock::lease> got;
    std::string failed;
    std::thread attempt([&] {
        try {
            got = holder.try_acquire(key, {.mode = sfu});
        } catch (const std::exception& e) {
            failed = e.what();
        }
    });
    std::int64_t held_tx = 0;
    REQUIRE(test::eventually(
        [&] {
            std::this_thread::sleep_for(150ms);
            held_tx = raw->scalar(v.idle_tx_sql);
            return held_tx > 0;
        },
        20s));
    v.kill(*raw, held_tx);  // the row lock ends with the connection
    auto next = other.acquire(key, 10s, {.mode = mode::conditional_update, .lease = 30s});
    row->commit();  // the pool's session goes on, and then the bump
    occupy.join();
    attempt.join();
    CAPTURE(failed);
    CHECK(failed.empty());
    CHECK_FALSE(got);
    // The next holder's token is still the key's latest: its fences pass.
    CHECK(raw->scalar("SELECT token FROM " + db.table("fences") + " WHERE lock_key = '" + key + "'") == next.token());
    CHECK(next.renew());
    CHECK_FALSE(next.lost());
}

TEST_CASE_TEMPLATE("leases held across a server restart stay held and keep being renewed", Db, SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    const sqlock::client_options o = db.options(2s, 3s);
    auto holder = sqlock::client::open(db.url(), o);
    auto other = sqlock::client::open(db.url(), o);

    std::vector<sqlock::lease> held;
    for (mode m : lease_modes)
        held.push_back(holder.acquire(std::string("lease-fault/restart/") + sqlock::to_string(m), 10s,
                                      {.mode = m, .lease = 5s}));

    test::servers("restart " + db.name());

    // Two more renewals of each lease after the restart, on new connections.
    const std::uint64_t after_restart = holder.stats().renewals;
    CHECK(test::eventually([&] { return holder.stats().renewals >= after_restart + 2 * held.size(); }, 10s));
    for (auto& l : held) {
        CAPTURE(l.key());
        CHECK_FALSE(l.lost());
        CHECK_FALSE(other.try_acquire(l.key(), {.mode = l.mode()}));
        const auto info = other.inspect(l.key());
        CHECK(info.held);
        CHECK(info.owner == l.owner());
        CHECK(info.token == l.token());
    }
    CHECK(holder.stats().leases_lost == 0);
}

TEST_CASE_TEMPLATE(
    "leases outlived by a server outage are reported lost while it is down and granted again only after their "
    "database expiry",
    Db, SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    sqlock::client_options o = db.options(2s, 3s);
    o.sweep = false;  // keep the expired unique_insert row for the comparison below
    auto holder = sqlock::client::open(db.url(), o);
    std::atomic<int> lost_calls{0};

    std::vector<sqlock::lease> held;
    for (mode m : lease_modes)
        held.push_back(holder.acquire(std::string("lease-fault/outage/") + sqlock::to_string(m), 10s,
                                      {.mode = m,
                                       .lease = 2s,
                                       .on_lost = [&](const std::string&, std::int64_t) { ++lost_calls; }}));

    test::servers("stop-one " + db.name());
    const auto stopped = std::chrono::steady_clock::now();
    // At the local deadline, without the database: it is still down.
    CHECK(test::eventually([&] { return lost_calls.load() == static_cast<int>(held.size()); }, 3500ms));
    for (auto& l : held) {
        CAPTURE(l.key());
        CHECK(l.lost());
        CHECK(l.stop_token().stop_requested());
        CHECK_THROWS_AS(l.check(), sqlock::lease_lost_error);
    }
    CHECK(holder.stats().leases_lost == held.size());
    std::this_thread::sleep_until(stopped + 4s);
    test::servers("start-one " + db.name());

    auto raw = db.raw();
    auto other = sqlock::client::open(db.url(), o);
    for (auto& l : held) {
        CAPTURE(l.key());
        const std::int64_t old_expiry = raw->scalar(db_time_sql(db, "expires", l.key()));
        REQUIRE(old_expiry > 0);
        auto next = other.acquire(l.key(), 10s, {.mode = l.mode()});
        CHECK(next.token() > l.token());
        // Granted no earlier than the old lease's expiry, both read from the
        // database clock.
        CHECK(raw->scalar(db_time_sql(db, "acquired", l.key())) >= old_expiry);
        CHECK(other.inspect(l.key()).owner == next.owner());
    }
    CHECK(lost_calls.load() == static_cast<int>(held.size()));
}

}  // TEST_SUITE("fault")
