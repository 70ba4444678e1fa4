// client_options.durability: relaxed makes sqlock's own commits skip the wait
// for the disk (PostgreSQL synchronous_commit = off, SQLite synchronous =
// NORMAL) and nothing else; strict leaves the database's setting alone for
// every commit but a release's, which never waits for the disk (a release
// lost in a crash only keeps the key until its lease runs out); MySQL/MariaDB
// refuse relaxed and have no per-commit setting. The setting is seen from inside the database
// by test::commit_probe (a trigger in the writing session).

#include "support/commit_probe.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sqlock::durability;
using sqlock::mode;

namespace {

sqlock::client open_with(const test::backend_base& db, durability d, const std::string& url = {}) {
    auto o = db.options();
    o.durability = d;
    return sqlock::client::open(url.empty() ? db.url() : url, o);
}

// Every kind of write a client makes: grants and releases in each mode (on
// PostgreSQL a select_for_update grant bumps the fence on a second
// connection), a renewal, a forced release, and a job run's ledger rows.
void write_everything(const test::backend_base& db, sqlock::client& c) {
    for (mode m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        auto l = c.try_acquire("dur/" + std::string(sqlock::to_string(m)), {.mode = m});
        REQUIRE(l);
        if (m != mode::select_for_update) CHECK(l->renew());
        l->release();
    }
    auto held = c.try_acquire("dur/forced");
    REQUIRE(held);
    c.force_release("dur/forced", "durability test");
    sqlock::job_runner runner(c);
    CHECK(runner.run("dur-job", "run-1", [](const sqlock::job_context&) { return std::string("done"); }).status ==
          sqlock::job_status::ran);
}

}  // namespace

TEST_SUITE("durability") {

TEST_CASE_TEMPLATE("a strict client waits for the disk at every commit but a release's", Db, test::sqlite_db,
                   test::postgres_db) {
    Db db;
    test::commit_probe probe(db);
    auto c = open_with(db, durability::strict);
    // Grants and renewals in every mode, a forced release (it bumps the
    // fence), and a job run's ledger rows: the database's own setting.
    write_everything(db, c);
    CHECK(probe.writes() >= 10);
    CHECK(probe.writes_with(probe.strict(), "job_runs") == probe.writes_to("job_runs"));
    CHECK(probe.writes_to("job_runs") >= 2);
    CHECK(probe.writes_with(probe.strict(), "fences") == probe.writes_to("fences"));
    // Only the releases (each mode's, and the job's lock), which clear or
    // delete lock rows, skipped the wait; everything else waited.
    CHECK(probe.writes_with(probe.relaxed()) == probe.writes_with(probe.relaxed(), "locks"));
    CHECK(probe.writes_with(probe.relaxed()) >= 1);
    CHECK(probe.writes_with(probe.strict()) + probe.writes_with(probe.relaxed()) == probe.writes());

    // Phase by phase: grants wait for the disk, releases do not.
    const auto grants_before = probe.writes();
    const auto strict_before = probe.writes_with(probe.strict());
    std::vector<sqlock::lease> held;
    for (mode m : test::modes_of(db)) {
        auto l = c.try_acquire("dur/phase/" + std::string(sqlock::to_string(m)), {.mode = m});
        REQUIRE(l);
        if (m != mode::select_for_update) CHECK(l->renew());
        held.push_back(std::move(*l));
    }
    const auto granted = probe.writes() - grants_before;
    CHECK(granted >= 4);
    CHECK(probe.writes_with(probe.strict()) - strict_before == granted);
    const auto releases_before = probe.writes_with(probe.relaxed());
    const auto total_before = probe.writes();
    for (auto& l : held) l.release();
    // unique_insert and conditional_update each write their lock row; a
    // select_for_update release is a rollback and writes nothing.
    CHECK(probe.writes() - total_before == 2);
    CHECK(probe.writes_with(probe.relaxed()) - releases_before == 2);
}

TEST_CASE_TEMPLATE("a strict client's queue rows do not wait for the disk", Db, test::sqlite_db, test::postgres_db) {
    Db db;
    test::commit_probe probe(db);
    auto holder = open_with(db, durability::strict);
    auto waiter = open_with(db, durability::strict);
    auto held = holder.try_acquire("dur/queue");
    REQUIRE(held);
    const auto grant_writes = probe.writes();
    CHECK(probe.writes_with(probe.strict()) == grant_writes);
    // The waiter takes a ticket, is heartbeated while it waits (the lease is
    // short so the watchdog beats it), and leaves the queue at its timeout.
    CHECK_THROWS_AS((void)waiter.acquire("dur/queue", 1500ms, {.lease = 1s, .fair = true}), sqlock::timeout_error);
    CHECK(probe.writes_to("waiters") >= 2);  // the ticket and its leaving
    CHECK(probe.writes_with(probe.relaxed(), "waiters") == probe.writes_to("waiters"));
    CHECK(probe.writes() - grant_writes == probe.writes_to("waiters"));
    // A grant from the queue waits for the disk; its leaving the queue is
    // part of the grant's own commit.
    const auto queue_writes = probe.writes_to("waiters");
    auto next = std::thread([&] {
        auto l = waiter.acquire("dur/queue", 10s, {.fair = true});
        l.release();
    });
    while (probe.writes_to("waiters") == queue_writes) std::this_thread::sleep_for(5ms);  // queued again
    const auto strict_before = probe.writes_with(probe.strict());
    held->release();
    next.join();
    CHECK(probe.writes_with(probe.strict(), "locks") >= 2);
    CHECK(probe.writes_with(probe.strict(), "fences") >= 2);
    CHECK(probe.writes_with(probe.strict()) > strict_before);
}

TEST_CASE_TEMPLATE("a strict PostgreSQL client keeps the synchronous_commit its URL asks for", Db, test::postgres_db) {
    // Strict does not force `on`: a setting from the URL (or the role, the
    // database, the server) stays in force for everything but a release.
    Db db;
    test::commit_probe probe(db);
    const std::string url = db.url() + (db.url().find('?') == std::string::npos ? "?" : "&") +
                            "options=-c%20synchronous_commit%3Dremote_write";
    auto c = open_with(db, durability::strict, url);
    auto l = c.try_acquire("dur/url");
    REQUIRE(l);
    CHECK(l->renew());
    CHECK(probe.writes() >= 3);
    CHECK(probe.writes_with("remote_write") == probe.writes());
    const auto before = probe.writes();
    l->release();
    CHECK(probe.writes() == before + 1);
    CHECK(probe.writes_with("off") == 1);
}

TEST_CASE_TEMPLATE("a relaxed client commits every write of its own without waiting for the disk", Db,
                   test::sqlite_db, test::postgres_db) {
    Db db;
    test::commit_probe probe(db);
    auto c = open_with(db, durability::relaxed);
    write_everything(db, c);
    CHECK(probe.writes() >= 10);
    CHECK(probe.writes_with(probe.relaxed()) == probe.writes());
    // Only sqlock's connections: the application's keep the database's setting.
    CHECK(probe.application_has(probe.strict()));
    auto strict = open_with(db, durability::strict);
    const auto before = probe.writes();
    auto l = strict.try_acquire("dur/strict-beside-relaxed");
    REQUIRE(l);
    CHECK(probe.writes() > before);
    CHECK(probe.writes_with(probe.strict()) == probe.writes() - before);
}

TEST_CASE_TEMPLATE("locks keep their contract under relaxed durability", Db, test::sqlite_db, test::postgres_db) {
    Db db;
    auto a = open_with(db, durability::relaxed);
    auto b = open_with(db, durability::relaxed);
    std::int64_t last = 0;
    for (int i = 0; i < 3; ++i) {
        auto first = a.try_acquire("reports/nightly");
        REQUIRE(first);
        CHECK(first->token() > last);
        CHECK_FALSE(b.try_acquire("reports/nightly"));
        first->release();
        auto second = b.acquire("reports/nightly", 5s);
        CHECK(second.token() > first->token());
        last = second.token();
    }
    CHECK(a.inspect("reports/nightly").token == last);
}

TEST_CASE_TEMPLATE("MySQL refuses relaxed durability with a reason, before connecting", Db, test::mysql_db) {
    Db db;
    for (const std::string& url : {db.url(), std::string("mysql://nobody@127.0.0.1:1/none")}) {
        CAPTURE(url);
        try {
            (void)open_with(db, durability::relaxed, url);
            FAIL("expected config_error");
        } catch (const sqlock::config_error& e) {
            const std::string what = e.what();
            CHECK(what.find("innodb_flush_log_at_trx_commit") != std::string::npos);
            CHECK(what.find("use strict durability") != std::string::npos);
        }
    }
    auto strict = open_with(db, durability::strict);
    CHECK(strict.try_acquire("dur/mysql"));
}

}  // TEST_SUITE("durability")

TEST_SUITE("unit") {

TEST_CASE("durability is strict by default, has names, and must be one of the two") {
    CHECK(sqlock::client_options{}.durability == durability::strict);
    CHECK(std::string(sqlock::to_string(durability::strict)) == "strict");
    CHECK(std::string(sqlock::to_string(durability::relaxed)) == "relaxed");
    sqlock::client_options bogus;
    bogus.durability = static_cast<durability>(7);
    CHECK_THROWS_AS(sqlock::client::open("sqlite:/proc/no/such/dir/x.db", bogus), sqlock::config_error);
}

}  // TEST_SUITE("unit")
