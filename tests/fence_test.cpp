// Fenced application writes: a transaction fenced with a lease commits only
// while that lease holds its key, and no other owner can be granted the key
// before the transaction ends. Each backend through its own driver and
// helper header (sqlock/postgres.hpp, sqlock/mysql.hpp, sqlock/sqlite.hpp).

#include "support/doctest_types.hpp"
#include "support/helpers.hpp"

#include <sqlock/mysql.hpp>
#include <sqlock/postgres.hpp>
#include <sqlock/sqlite.hpp>
#include <sqlock/sqlock.hpp>

#include <sqlite3.h>


#include <chrono>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

struct app_table {
    const test::backend_base& db;
    std::string name = db.table("app");
    explicit app_table(const test::backend_base& d) : db(d) {
        db.raw()->exec("CREATE TABLE " + name + " (what VARCHAR(40) NOT NULL, token BIGINT NOT NULL)");
    }
    std::string insert(const std::string& what, std::int64_t token) const {
        return "INSERT INTO " + name + " (what, token) VALUES ('" + what + "', " + std::to_string(token) + ")";
    }
    std::int64_t count(const std::string& what) const {
        return db.raw()->scalar("SELECT COUNT(*) FROM " + name + " WHERE what = '" + what + "'");
    }
};

// Runs begin / fence / insert / commit; returns the lease_lost_error's
// message, or "" when the write committed.
std::string fenced_insert(test::raw_connection& app, const app_table& t, const sqlock::lease& held,
                          const std::string& what) {
    app.begin();
    try {
        app.fence(held);
    } catch (const sqlock::lease_lost_error& e) {
        app.rollback();
        return e.what();
    }
    app.exec(t.insert(what, held.token()));
    app.commit();
    return "";
}

}  // namespace

TEST_SUITE("fence") {

TEST_CASE_TEMPLATE("a fenced transaction commits while its lease holds the key", Db, ALL_BACKENDS) {
    Db db;
    app_table t(db);
    auto client = db.open();
    for (auto m : {sqlock::mode::unique_insert, sqlock::mode::conditional_update, sqlock::mode::select_for_update}) {
        if (m == sqlock::mode::select_for_update && !db.row_locks()) continue;
        CAPTURE(std::string(sqlock::to_string(m)));
        auto held = client.try_acquire("ledger/close", {.mode = m});
        REQUIRE(held);
        auto app = db.raw();
        CHECK(fenced_insert(*app, t, *held, sqlock::to_string(m)).empty());
        CHECK(t.count(sqlock::to_string(m)) == 1);
    }
}

TEST_CASE_TEMPLATE("a fence rejects a lease that expired, was released or was granted again", Db, ALL_BACKENDS) {
    Db db;
    app_table t(db);
    auto a = db.open();
    auto b = db.open();
    auto app = db.raw();

    auto expired = a.try_acquire("k/expired", {.lease = 300ms, .auto_renew = false});
    REQUIRE(expired);
    std::this_thread::sleep_for(400ms);  // nobody has taken it: only the expiry stops it
    CHECK(fenced_insert(*app, t, *expired, "expired").find("expired or was released") != std::string::npos);

    auto released = a.try_acquire("k/released");
    REQUIRE(released);
    released->release();
    CHECK(fenced_insert(*app, t, *released, "released").find("not held") != std::string::npos);

    auto first = a.try_acquire("k/again", {.lease = 300ms, .auto_renew = false});
    REQUIRE(first);
    std::this_thread::sleep_for(400ms);
    auto second = b.try_acquire("k/again");
    REQUIRE(second);
    const std::string why = fenced_insert(*app, t, *first, "stale");
    CHECK(why.find("granted again") != std::string::npos);
    CHECK(fenced_insert(*app, t, *second, "current").empty());

    // The same write without a fence is not stopped by anything.
    app->exec(t.insert("unfenced", first->token()));
    CHECK(t.count("expired") == 0);
    CHECK(t.count("released") == 0);
    CHECK(t.count("stale") == 0);
    CHECK(t.count("current") == 1);
    CHECK(t.count("unfenced") == 1);
}

TEST_CASE_TEMPLATE("a fence keeps any new grant of the key waiting until its transaction ends", Db, ALL_BACKENDS) {
    Db db;
    app_table t(db);
    auto a = db.open();
    auto o = db.options();
    o.statement_timeout = 1s;  // SQLite: a grant waits this long for the write lock
    o.row_lock_timeout = 100ms;
    auto b = sqlock::client::open(db.url(), o);
    auto held = a.try_acquire("k/slow", {.lease = 500ms, .auto_renew = false});
    REQUIRE(held);
    auto app = db.raw();
    app->begin();
    app->fence(*held);
    std::this_thread::sleep_for(700ms);  // the lease has now expired by database time
    CHECK_FALSE(b.try_acquire("k/slow"));  // but the open fenced transaction holds off new grants
    app->exec(t.insert("late but fenced", held->token()));
    app->commit();
    auto next = b.try_acquire("k/slow");
    REQUIRE(next);
    CHECK(next->token() > held->token());
    CHECK(t.count("late but fenced") == 1);
}

TEST_CASE_TEMPLATE("a fence holds off the next grant of the client that holds the fenced lease too", Db,
                   ALL_BACKENDS) {
    // The client that was granted the key last is the one whose next grant
    // can be the cheapest: on MariaDB a lean grant, one UPDATE of the lock
    // row alone (migrations/mysql/0014_lean_grants.sql), which the fence row's
    // share lock would not hold off; the fence share-locks the lock row too
    // while the key is lean. Without that, the grant below is made at once and
    // the fenced write commits after it.
    Db db;
    app_table t(db);
    auto o = db.options();
    o.statement_timeout = 1s;  // SQLite: a grant waits this long for the write lock
    o.row_lock_timeout = 100ms;
    auto c = sqlock::client::open(db.url(), o);
    const sqlock::lock_options once{.lease = 500ms, .reentrant = false, .auto_renew = false};
    c.try_acquire("k/lean", once)->release();  // the key is now this client's, and (on MariaDB) lean
    auto held = c.try_acquire("k/lean", once);
    REQUIRE(held);
    auto app = db.raw();
    app->begin();
    app->fence(*held);
    std::this_thread::sleep_for(700ms);  // the lease has now expired by database time
    CHECK_FALSE(c.try_acquire("k/lean", once));  // held off by the open fenced transaction
    app->exec(t.insert("late but fenced", held->token()));
    app->commit();
    auto next = c.try_acquire("k/lean", once);
    REQUIRE(next);
    CHECK(next->token() > held->token());
    CHECK(t.count("late but fenced") == 1);
    CHECK(fenced_insert(*app, t, *held, "stale").find("granted again") != std::string::npos);
    CHECK(fenced_insert(*app, t, *next, "current").empty());
}

TEST_CASE_TEMPLATE("the assert_held SQL function fences applications in any language", Db, SERVER_BACKENDS) {
    Db db;
    auto client = db.open();
    auto held = client.try_acquire("k/sql");
    REQUIRE(held);
    auto raw = db.raw();
    const std::string fn = "SELECT " + db.prefix + "assert_held('k/sql', ";
    CHECK(raw->scalar(fn + std::to_string(held->token()) + ")") == held->token());
    CHECK_THROWS(raw->scalar(fn + std::to_string(held->token() - 1) + ")"));
    CHECK_THROWS(raw->scalar("SELECT " + db.prefix + "assert_held('k/never', 1)"));
    held->release();
    CHECK_THROWS(raw->scalar(fn + std::to_string(held->token()) + ")"));
    CHECK(held->fence_sql().find(db.prefix + "assert_held(") != std::string::npos);
}

TEST_CASE_TEMPLATE("a select_for_update lease fences writes until a later grant", Db, SERVER_BACKENDS) {
    Db db;
    app_table t(db);
    auto a = db.open();
    auto b = db.open();
    auto app = db.raw();
    auto held = a.try_acquire("k/rowlock", {.mode = sqlock::mode::select_for_update});
    REQUIRE(held);
    CHECK(fenced_insert(*app, t, *held, "row-locked").empty());
    held->release();
    auto next = b.try_acquire("k/rowlock");  // a lease mode now
    REQUIRE(next);
    CHECK(fenced_insert(*app, t, *held, "stale").find("granted again") != std::string::npos);
    CHECK(fenced_insert(*app, t, *next, "current").empty());
    CHECK(t.count("row-locked") == 1);
    CHECK(t.count("stale") == 0);
}

TEST_CASE_TEMPLATE("a fence outside a transaction or with another database's lease is refused", Db,
                   test::sqlite_db) {
    Db db;
    auto held = db.open().try_acquire("k/misuse");
    REQUIRE(held);
    sqlite3* handle = nullptr;
    REQUIRE(sqlite3_open(db.file.c_str(), &handle) == SQLITE_OK);
    CHECK_THROWS_AS(sqlock::sqlite::fence(handle, *held), sqlock::config_error);  // no BEGIN
    CHECK_THROWS_AS(sqlock::sqlite::fence(nullptr, *held), sqlock::config_error);
    CHECK_THROWS_AS(held->fence_sql(), sqlock::config_error);  // no stored functions on SQLite
    sqlite3_close(handle);
}

TEST_CASE_TEMPLATE("a semaphore permit is refused by every fence helper with config_error", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open();
    auto permit = c.try_acquire_permit("sem/fence", 2);
    REQUIRE(permit);
    auto app = db.raw();
    app->begin();
    try {
        app->fence(*permit);
        FAIL("expected config_error");
    } catch (const sqlock::config_error& e) {
        CHECK_MESSAGE(std::string(e.what()).find("permit") != std::string::npos, e.what());
    }
    app->rollback();
}

// A moved-from lease holds nothing: lease.hpp promises lease_lost_error
// from its fence_sql(), and the PostgreSQL and MySQL helpers said
// config_error ("... not " and an empty dialect) instead.
TEST_CASE_TEMPLATE("a moved-from lease is refused by every fence helper with lease_lost_error", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open();
    auto held = c.try_acquire("k/moved");
    REQUIRE(held);
    sqlock::lease taken = std::move(*held);
    auto app = db.raw();
    app->begin();
    CHECK_THROWS_AS(app->fence(*held), sqlock::lease_lost_error);  // NOLINT(bugprone-use-after-move): on purpose
    app->rollback();
    taken.release();
}

TEST_CASE_TEMPLATE("a fence outside a transaction or with another database's lease is refused", Db,
                   test::postgres_db) {
    Db db;
    test::sqlite_db other;
    auto foreign = other.open().try_acquire("k/misuse");
    REQUIRE(foreign);
    pqxx::connection conn(db.url());
    pqxx::work tx(conn);
    CHECK_THROWS_AS(sqlock::postgres::fence(tx, *foreign), sqlock::config_error);
}

TEST_CASE_TEMPLATE("a fence outside a transaction or with another database's lease is refused", Db, test::mysql_db) {
    Db db;
    test::sqlite_db other;
    auto foreign = other.open().try_acquire("k/misuse");
    auto held = db.open().try_acquire("k/misuse");
    REQUIRE(foreign);
    REQUIRE(held);
    auto app = db.raw();
    CHECK_THROWS_AS(app->fence(*held), sqlock::config_error);  // autocommit on
    app->begin();
    CHECK_THROWS_AS(app->fence(*foreign), sqlock::config_error);
    app->fence(*held);
    app->rollback();
}

}  // TEST_SUITE("fence")
