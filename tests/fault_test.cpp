// Faults of the database server itself: restarts, outages, killed
// connections. These tests stop and restart the test servers
// (scripts/test-servers.sh), so ctest runs them under the server's resource lock.

#include "support/doctest_types.hpp"
#include "support/helpers.hpp"

#include <sqlock/sqlock.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

constexpr sqlock::mode lease_modes_then_row_lock[] = {
    sqlock::mode::conditional_update, sqlock::mode::select_for_update,
    // Last: its release deletes the key's lock row, so a counter kept in
    // that row would be gone when the server comes back.
    sqlock::mode::unique_insert};


// Waits (bounded, about 10 s) until `sql` returns `value`. Polls more slowly
// than every 100 ms: MariaDB serves information_schema.innodb_trx from a cache
// that it refreshes at most that often, so a transaction a few milliseconds
// old may not be listed yet.
bool wait_for(test::raw_connection& raw, const std::string& sql, std::int64_t value) {
    for (int i = 0; i < 50; ++i) {
        if (raw.scalar(sql) == value) return true;
        std::this_thread::sleep_for(200ms);
    }
    return false;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE_TEMPLATE("fencing tokens keep growing across a server crash and restart", Db, SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    auto a = db.open();
    const std::string key = "fault/restart";

    std::int64_t before = 0;
    for (auto m : lease_modes_then_row_lock) {
        CAPTURE(std::string(sqlock::to_string(m)));
        // A short lease: a release does not wait for the disk, so the crash
        // may undo the last one, and the key is then held until the lease
        // runs out (sqlock::durability).
        auto l = a.acquire(key, 10s, {.mode = m, .lease = 2s});
        CHECK(l.token() > before);
        before = l.token();
        l.release();
    }
    REQUIRE(before > 0);

    test::servers("restart " + db.name());

    // The same client: every pooled connection died with the server.
    std::int64_t last = before;
    for (auto m : {sqlock::mode::unique_insert, sqlock::mode::conditional_update, sqlock::mode::select_for_update}) {
        CAPTURE(std::string(sqlock::to_string(m)));
        auto l = a.acquire(key, 10s, {.mode = m});
        CHECK(l.token() > before);
        CHECK(l.token() > last);
        last = l.token();
        l.release();
    }
    // A client opened after the restart.
    auto b = db.open();
    for (auto m : {sqlock::mode::select_for_update, sqlock::mode::unique_insert, sqlock::mode::conditional_update}) {
        CAPTURE(std::string(sqlock::to_string(m)));
        auto l = b.acquire(key, 10s, {.mode = m});
        CHECK(l.token() > before);
        CHECK(l.token() > last);
        last = l.token();
        l.release();
    }
    CHECK(b.inspect(key).token == last);
}

TEST_CASE_TEMPLATE(
    "a select_for_update lease held across a server restart is lost and its key is taken with a larger token", Db,
    SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    auto a = db.open();
    const std::string key = "fault/held-across-restart";
    constexpr auto sfu = sqlock::mode::select_for_update;

    auto held = a.acquire(key, 10s, {.mode = sfu});
    const std::int64_t old_token = held.token();
    REQUIRE(held.renew());  // a holder that has renewed (pinged) before, as a watchdog would

    test::servers("restart " + db.name());

    CHECK_FALSE(held.renew());
    CHECK(held.lost());
    CHECK_THROWS_AS(held.check(), sqlock::lease_lost_error);

    auto b = db.open();
    auto next = b.acquire(key, 10s, {.mode = sfu});
    CHECK(next.token() > old_token);
    // Releasing the lost lease leaves the new holder alone.
    CHECK_NOTHROW(held.release());
    CHECK_FALSE(a.try_acquire(key, {.mode = sfu}));
    CHECK(b.inspect(key).held);
}

TEST_CASE_TEMPLATE("a stopped server gives connection errors, never a hang, and the client recovers when it is back",
                   Db, SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    const sqlock::client_options o = db.options(2s, 3s);
    auto c = sqlock::client::open(db.url(), o);

    std::optional<sqlock::lease> held = c.try_acquire("fault/outage/held", {.lease = 30s});
    REQUIRE(held);
    REQUIRE(c.try_acquire("fault/outage/before"));

    test::servers("stop-one " + db.name());

    CHECK_THROWS_AS((void)c.try_acquire("fault/outage/other"), sqlock::connection_error);
    CHECK_THROWS_AS(held->renew(), sqlock::connection_error);
    CHECK_THROWS_AS(c.inspect("fault/outage/other"), sqlock::connection_error);
    // The destructor cannot reach the server either, and must not throw.
    CHECK_NOTHROW(held.reset());

    test::servers("start-one " + db.name());

    auto after = c.try_acquire("fault/outage/after");
    REQUIRE(after);
    CHECK(after->token() > 0);
    CHECK_FALSE(after->lost());
    CHECK(after->renew());
}

TEST_CASE_TEMPLATE("a select_for_update holder whose connection is killed learns it lost the key", Db,
                   SERVER_BACKENDS) {
    Db db;
    auto a = db.open();
    auto raw = db.raw();
    const std::string key = "fault/killed-connection";
    constexpr auto sfu = sqlock::mode::select_for_update;

    auto held = a.acquire(key, 10s, {.mode = sfu});
    const std::int64_t old_token = held.token();
    REQUIRE(held.renew());

    // The one connection of this test's client that sits in an open transaction.
    std::string holders;
    if (db.name() == "postgres") {
        // The backend holding a row lock on this test's own lock table.
        holders = " FROM pg_stat_activity a WHERE a.application_name = 'sqlock'"
                  " AND a.state LIKE 'idle in transaction%' AND a.pid IN (SELECT l.pid FROM pg_locks l"
                  " WHERE l.relation = '" +
                  db.table("locks") + "'::regclass AND l.mode = 'RowShareLock' AND l.granted)";
        REQUIRE(wait_for(*raw, "SELECT count(*)" + holders, 1));
        const auto pid = raw->scalar("SELECT a.pid" + holders);
        REQUIRE(raw->scalar("SELECT pg_terminate_backend(" + std::to_string(pid) + ")::int") == 1);
        CHECK(wait_for(*raw, "SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid), 0));
    } else {
        holders = " FROM information_schema.innodb_trx t JOIN information_schema.processlist p"
                  " ON p.ID = t.trx_mysql_thread_id WHERE p.DB = DATABASE() AND p.COMMAND = 'Sleep'"
                  " AND t.trx_rows_locked > 0 AND p.ID <> CONNECTION_ID()";
        REQUIRE(wait_for(*raw, "SELECT count(*)" + holders, 1));
        const auto id = raw->scalar("SELECT p.ID" + holders);
        raw->exec("KILL " + std::to_string(id));
        CHECK(wait_for(*raw, "SELECT count(*) FROM information_schema.processlist WHERE ID = " + std::to_string(id),
                       0));
    }

    CHECK_FALSE(held.renew());
    CHECK(held.lost());

    auto b = db.open();
    auto next = b.acquire(key, 10s, {.mode = sfu});
    CHECK(next.token() > old_token);
}

TEST_CASE_TEMPLATE("a job whose database stops while it runs records its outcome once the database is back", Db,
                   SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    const sqlock::client_options o = db.options(2s, 3s);
    sqlock::job_runner runner(sqlock::client::open(db.url(), o), {.lease = 30s});
    std::thread restarter;
    auto out = runner.run("outage", "during-body", [&](const sqlock::job_context&) {
        test::servers("stop-one " + db.name());
        restarter = std::thread([&] {
            std::this_thread::sleep_for(1500ms);
            test::servers("start-one " + db.name());
        });
        return std::string("done while the database was away");
    });
    restarter.join();
    CHECK(out.status == sqlock::job_status::ran);
    CHECK(out.record.status == sqlock::run_status::succeeded);
    CHECK(out.record.attempts == 1);
}

TEST_CASE_TEMPLATE("a job whose database stays away past its lease is lost, not done, and runs again later", Db,
                   SERVER_BACKENDS) {
    Db db;
    test::server_comes_back guard{db.name()};
    const sqlock::client_options o = db.options(1s, 1s);
    sqlock::job_runner runner(sqlock::client::open(db.url(), o), {.lease = 3s});
    std::int64_t first_token = 0;
    auto out = runner.run("outage", "past-lease", [&](const sqlock::job_context& c) {
        first_token = c.token;
        test::servers("stop-one " + db.name());
        return std::string("done, but nobody will know");
    });
    CHECK(out.status == sqlock::job_status::lost);
    CHECK(out.executed);
    CHECK(out.error.find("could not be recorded") != std::string::npos);

    test::servers("start-one " + db.name());
    sqlock::job_runner later(db.open(), {.wait = 30s});
    auto again = later.run("outage", "past-lease", [](const sqlock::job_context& c) {
        CHECK(c.attempt == 2);
        return std::string("done");
    });
    CHECK(again.status == sqlock::job_status::ran);
    CHECK(again.record.attempts == 2);
    CHECK(again.record.token > first_token);
}

}  // TEST_SUITE("fault")
