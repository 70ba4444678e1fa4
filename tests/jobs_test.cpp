// The job runner and its ledger: a run key runs once across processes,
// failures are retried up to a limit, a run whose holder died is retried
// after its lease, and a run that lost its lease can never record success.

#include "dialects/common/fault.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <latch>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

// Makes the key's lease expire now, by the database's clock, behind the
// holder's back (as if it had been frozen past its lease).
void expire_lease(const test::backend_base& db, const std::string& key) {
    const std::string where = " WHERE lock_key = '" + key + "'";
    std::string set = " SET expires_ms = 0";
    if (db.name() == "postgres") set = " SET expires_at = clock_timestamp() - interval '1 second'";
    if (db.name() == "mysql") set = " SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND";
    db.raw()->exec("UPDATE " + db.table("locks") + set + where);
}

std::vector<std::string> lines_of(const std::string& file) {
    std::ifstream in(file);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

}  // namespace

TEST_SUITE("jobs") {

TEST_CASE_TEMPLATE("a run key runs once and later calls get the stored result", Db, ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open());
    int calls = 0;
    auto first = runner.run("reports/daily", "2026-11-21", [&](const sqlock::job_context& c) {
        ++calls;
        CHECK(c.job == "reports/daily");
        CHECK(c.run_key == "2026-11-21");
        CHECK(c.attempt == 1);
        CHECK(c.token == c.lease.token());
        CHECK_FALSE(c.stop.stop_requested());
        return std::string("42 rows");
    });
    CHECK(first.status == sqlock::job_status::ran);
    CHECK(first.executed);
    CHECK(first.record.status == sqlock::run_status::succeeded);
    CHECK(first.record.result == "42 rows");
    CHECK(first.record.attempts == 1);
    REQUIRE(first.record.started_at);
    REQUIRE(first.record.finished_at);
    CHECK(*first.record.finished_at >= *first.record.started_at);

    sqlock::job_runner elsewhere(db.open());
    auto second = elsewhere.run("reports/daily", "2026-11-21", [&](const sqlock::job_context&) { ++calls; });
    CHECK(second.status == sqlock::job_status::already_done);
    CHECK_FALSE(second.executed);
    CHECK(second.record.result == "42 rows");
    CHECK(second.record.holder == first.record.holder);
    CHECK(second.record.token == first.record.token);
    CHECK(second.record.finished_at == first.record.finished_at);
    CHECK(calls == 1);

    // Another run key, or another job with the same run key, is another run.
    CHECK(runner.run("reports/daily", "2026-11-22", [&](const sqlock::job_context&) { ++calls; }).status ==
          sqlock::job_status::ran);
    CHECK(runner.run("reports/weekly", "2026-11-21", [&](const sqlock::job_context&) { ++calls; }).status ==
          sqlock::job_status::ran);
    CHECK(calls == 3);
    CHECK(runner.records("reports/daily").size() == 2);
    CHECK(runner.records().size() == 3);
}

TEST_CASE_TEMPLATE("jobs run under every lease mode the backend has", Db, ALL_BACKENDS) {
    Db db;
    for (auto m : {sqlock::mode::unique_insert, sqlock::mode::conditional_update, sqlock::mode::select_for_update}) {
        if (m == sqlock::mode::select_for_update && !db.row_locks()) continue;
        CAPTURE(std::string(sqlock::to_string(m)));
        sqlock::job_runner runner(db.open(), {.mode = m});
        auto out = runner.run("modes", sqlock::to_string(m), [](const sqlock::job_context& c) {
            return std::string(sqlock::to_string(c.lease.mode()));
        });
        CHECK(out.status == sqlock::job_status::ran);
        CHECK(out.record.result == sqlock::to_string(m));
        CHECK(runner.run("modes", sqlock::to_string(m), [](const sqlock::job_context&) {}).status ==
              sqlock::job_status::already_done);
    }
}

TEST_CASE_TEMPLATE("a run held by another instance is busy and does not run", Db, ALL_BACKENDS) {
    Db db;
    sqlock::job_runner a(db.open());
    sqlock::job_runner b(db.open());
    std::latch started(1), finish(1);
    std::thread holder([&] {
        (void)a.run("billing/close", "order-7", [&](const sqlock::job_context&) {
            started.count_down();
            finish.wait();
        });
    });
    started.wait();
    bool ran = false;
    auto busy = b.run("billing/close", "order-7", [&](const sqlock::job_context&) { ran = true; });
    CHECK(busy.status == sqlock::job_status::busy);
    CHECK_FALSE(busy.executed);
    CHECK_FALSE(ran);
    CHECK(busy.record.status == sqlock::run_status::running);
    CHECK(busy.error.find("held by") != std::string::npos);
    finish.count_down();
    holder.join();
    CHECK(b.run("billing/close", "order-7", [&](const sqlock::job_context&) { ran = true; }).status ==
          sqlock::job_status::already_done);
    CHECK_FALSE(ran);
}

TEST_CASE_TEMPLATE("a caller that waits for a busy run gets its result instead of running it again", Db,
                   ALL_BACKENDS) {
    Db db;
    sqlock::job_runner a(db.open());
    sqlock::job_runner b(db.open(), {.wait = 20s});
    std::latch started(1);
    std::thread holder([&] {
        (void)a.run("import", "batch-1", [&](const sqlock::job_context&) {
            started.count_down();
            std::this_thread::sleep_for(300ms);
            return std::string("imported");
        });
    });
    started.wait();
    bool ran = false;
    auto out = b.run("import", "batch-1", [&](const sqlock::job_context&) { ran = true; });
    holder.join();
    CHECK(out.status == sqlock::job_status::already_done);
    CHECK(out.record.result == "imported");
    CHECK_FALSE(ran);
}

TEST_CASE_TEMPLATE("failing jobs are retried up to the limit, then stay failed with the last error", Db,
                   ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open(), {.max_attempts = 3, .retry_backoff = 0ms});
    int calls = 0;
    auto failing = [&](const sqlock::job_context& c) {
        ++calls;
        CHECK(c.attempt == calls);
        throw std::runtime_error("boom " + std::to_string(c.attempt));
    };
    for (int attempt = 1; attempt <= 3; ++attempt) {
        auto out = runner.run("sync", "tenant-1", failing);
        CHECK(out.status == sqlock::job_status::failed);
        CHECK(out.executed);
        CHECK(out.error == "boom " + std::to_string(attempt));
        CHECK(out.record.status == sqlock::run_status::failed);
        CHECK(out.record.attempts == attempt);
        CHECK(out.record.last_error == "boom " + std::to_string(attempt));
        if (attempt < 3) {
            REQUIRE(out.retry_in);
            CHECK(*out.retry_in == 0ms);
        } else {
            CHECK_FALSE(out.retry_in);  // attempts used up
        }
    }
    auto after = runner.run("sync", "tenant-1", failing);
    CHECK(after.status == sqlock::job_status::failed);
    CHECK_FALSE(after.executed);
    CHECK(after.error == "boom 3");
    CHECK_FALSE(after.retry_in);
    CHECK(calls == 3);

    // A job that fails once and then succeeds keeps its attempt count.
    int flaky_calls = 0;
    auto flaky = [&](const sqlock::job_context&) {
        if (++flaky_calls == 1) throw std::runtime_error("transient");
        return std::string("ok");
    };
    CHECK(runner.run("sync", "tenant-2", flaky).status == sqlock::job_status::failed);
    auto ok = runner.run("sync", "tenant-2", flaky);
    CHECK(ok.status == sqlock::job_status::ran);
    CHECK(ok.record.attempts == 2);
    CHECK(ok.record.last_error == "transient");
}

TEST_CASE_TEMPLATE("a failed run is not retried before its backoff, by database time", Db, ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open(), {.retry_backoff = 1min});
    int calls = 0;
    auto failing = [&](const sqlock::job_context&) {
        ++calls;
        throw std::runtime_error("down");
    };
    auto first = runner.run("mail", "digest", failing);
    REQUIRE(first.retry_in);
    CHECK(*first.retry_in == 1min);
    REQUIRE(first.record.retry_at);
    REQUIRE(first.record.finished_at);
    auto second = runner.run("mail", "digest", failing);
    CHECK(second.status == sqlock::job_status::failed);
    CHECK_FALSE(second.executed);
    REQUIRE(second.retry_in);
    CHECK(*second.retry_in > 50s);
    CHECK(*second.retry_in <= 1min);
    CHECK(calls == 1);
}

TEST_CASE_TEMPLATE("a run that loses its lease mid-run stops, records nothing as done, and runs again", Db,
                   ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open(), {.lease = 1500ms});
    auto thief = db.open();
    const std::string key = sqlock::job_runner::lock_key("etl", "night-1");
    std::int64_t first_token = 0;
    auto out = runner.run("etl", "night-1", [&](const sqlock::job_context& c) {
        first_token = c.token;
        expire_lease(db, key);
        auto stolen = thief.try_acquire(key);  // granted: the lease expired
        REQUIRE(stolen);
        CHECK(test::eventually([&] { return c.stop.stop_requested(); }, 10s));  // the watchdog noticed
        return std::string("half done");
    });
    CHECK(out.status == sqlock::job_status::lost);
    CHECK(out.executed);
    CHECK(out.error.find("not held") != std::string::npos);
    // Never marked done: marked lost, its attempt given back.
    CHECK(out.record.status == sqlock::run_status::failed);
    CHECK(out.record.attempts == 0);
    CHECK(out.record.token == first_token);
    CHECK(out.record.result.empty());
    CHECK(out.record.last_error.find("the lease was lost during the run") != std::string::npos);

    auto again = runner.run("etl", "night-1", [&](const sqlock::job_context& c) {
        CHECK(c.attempt == 1);
        return std::string("done");
    });
    CHECK(again.status == sqlock::job_status::ran);
    CHECK(again.record.attempts == 1);
    CHECK(again.record.token > first_token);
    CHECK(again.record.last_error.find("the lease was lost during the run") != std::string::npos);
}

// The database let the lease go during the body (here: expired by hand and
// taken by another client), so the fenced record is refused. Left
// "running", the row read to the next caller as a dead holder's attempt:
// with max_attempts 1, the run failed for good after one lost run.
TEST_CASE_TEMPLATE("a run whose lease the database took away is retried at once, and does not count", Db,
                   ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open(), {.lease = 1500ms, .max_attempts = 1});
    auto thief = db.open();
    const std::string key = sqlock::job_runner::lock_key("etl", "once");
    auto out = runner.run("etl", "once", [&](const sqlock::job_context& c) {
        expire_lease(db, key);
        auto stolen = thief.try_acquire(key);
        REQUIRE(stolen);
        stolen->release();
        CHECK(test::eventually([&] { return c.stop.stop_requested(); }, 10s));
        return std::string("half done");
    });
    REQUIRE(out.status == sqlock::job_status::lost);
    int calls = 0;
    auto again = runner.run("etl", "once", [&](const sqlock::job_context& c) {
        ++calls;
        CHECK(c.attempt == 1);
        return std::string("done");
    });
    CHECK(again.status == sqlock::job_status::ran);
    CHECK(calls == 1);
}

// A claim answered after the lease's deadline (its grant waited on SQLite's
// write lock longer than the lease) holds a lease already lost, while the
// database's copy still lets the claim through: the body must not start, as
// another instance may take the run over at any moment. SQLite, whose grant
// waits for the write lock up to statement_timeout (10 s); the servers' row
// lock waits end long before a lease. The check is the runner's, the same
// for every backend.
TEST_CASE("a run whose lease was lost before its body started does not run the body, nor count the attempt") {
    test::sqlite_db db;
    sqlock::job_runner runner(db.open(), {.lease = 300ms});
    REQUIRE(runner.run("late", "warm-up", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    auto writer = db.raw();
    writer->begin();  // BEGIN IMMEDIATE: the run's grant waits for this
    std::atomic<bool> ran{false};
    auto pending = std::async(std::launch::async, [&] {
        return runner.run("late", "k1", [&](const sqlock::job_context&) { ran = true; });
    });
    std::this_thread::sleep_for(2s);  // the grant was sent long before; its 300 ms lease has passed
    writer->commit();
    const auto out = pending.get();
    CHECK_FALSE(ran.load());
    CHECK(out.status == sqlock::job_status::lost);
    CHECK_FALSE(out.executed);
    CHECK(out.error.find("it was not run") != std::string::npos);
    auto again = runner.run("late", "k1", [&](const sqlock::job_context& c) { CHECK(c.attempt == 1); });
    CHECK(again.status == sqlock::job_status::ran);
    CHECK(again.record.attempts == 1);
}

// A database that answers but refuses the outcome's row is not retried
// until the lease is gone: the watchdog keeps the lease while the database
// answers, so that would never end, with the run's key held all along.
TEST_CASE_TEMPLATE("an outcome the database refuses ends the run as lost instead of retrying forever", Db,
                   ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open(), {.lease = 3s});
    REQUIRE(runner.run("refused", "warm-up", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    auto raw = db.raw();
    const std::string table = db.table("job_runs"), trigger = db.table("refuse");
    if (db.name() == "postgres") {
        raw->exec("CREATE FUNCTION " + trigger +
                  "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by a test trigger'; END $$");
        raw->exec("CREATE TRIGGER " + trigger + " BEFORE UPDATE ON " + table +
                  " FOR EACH ROW WHEN (NEW.status = 'succeeded') EXECUTE FUNCTION " + trigger + "()");
    } else if (db.name() == "mysql") {
        raw->exec("CREATE TRIGGER " + trigger + " BEFORE UPDATE ON " + table +
                  " FOR EACH ROW BEGIN IF NEW.status = 'succeeded' THEN"
                  " SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by a test trigger'; END IF; END");
    } else {
        raw->exec("CREATE TRIGGER " + trigger + " BEFORE UPDATE ON " + table +
                  " WHEN NEW.status = 'succeeded' BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END");
    }
    auto pending = std::async(std::launch::async, [&] {
        return runner.run("refused", "k1", [](const sqlock::job_context&) { return std::string("done"); });
    });
    const bool ended = pending.wait_for(30s) == std::future_status::ready;
    CHECK(ended);
    if (!ended) raw->exec("DROP TRIGGER " + trigger + (db.name() == "postgres" ? " ON " + table : ""));  // let it end
    const auto out = pending.get();
    if (ended) {
        CHECK(out.status == sqlock::job_status::lost);
        CHECK(out.executed);
        CHECK(out.error.find("refused by a test trigger") != std::string::npos);
        CHECK(out.record.status == sqlock::run_status::running);  // as claimed; never marked done
        CHECK(db.open().try_acquire(sqlock::job_runner::lock_key("refused", "k1")));  // and the key was let go
    }
}

// sqlock run's guardian stops PROGRAM at the lease's deadline even when a
// last-moment renewal kept the lease: PROGRAM may have stopped half-way, so
// the body says so with lease_lost_error and the run must not count as done
// or as a failed attempt waiting for its backoff.
TEST_CASE_TEMPLATE("a body that stops because it judged its lease gone is a lost run, retried at once", Db,
                   ALL_BACKENDS) {
    Db db;
    sqlock::job_runner runner(db.open(), {.retry_backoff = 1h, .max_backoff = 1h});
    auto out = runner.run("guarded", "r1", [](const sqlock::job_context&) -> std::string {
        throw sqlock::lease_lost_error("stopped at the lease's deadline");
    });
    CHECK(out.status == sqlock::job_status::lost);
    CHECK(out.executed);
    CHECK_FALSE(out.retry_in);
    CHECK(out.error.find("stopped at the lease's deadline") != std::string::npos);
    auto again = runner.run("guarded", "r1", [](const sqlock::job_context& c) {
        CHECK(c.attempt == 1);  // the lost attempt's number again
        return std::string("done");
    });
    CHECK(again.status == sqlock::job_status::ran);  // a failed attempt would wait an hour
}

TEST_CASE_TEMPLATE("a lost run does not use up max_attempts", Db, ALL_BACKENDS) {
    // "Retried at once, not a failed attempt" (docs/jobs.md): with one
    // attempt allowed, a lost run's row counted as the failed last attempt,
    // and the run key never ran again.
    Db db;
    sqlock::job_runner runner(db.open(), {.max_attempts = 1});
    auto out = runner.run("lost-once", "r1", [](const sqlock::job_context&) -> std::string {
        throw sqlock::lease_lost_error("stopped at the lease's deadline");
    });
    CHECK(out.status == sqlock::job_status::lost);
    int calls = 0;
    auto again = runner.run("lost-once", "r1", [&](const sqlock::job_context&) {
        ++calls;
        return std::string("done");
    });
    CHECK(again.status == sqlock::job_status::ran);
    CHECK(calls == 1);
    // A failed attempt still uses it up.
    auto failed = runner.run("fails-once", "r1", [](const sqlock::job_context&) -> std::string {
        throw std::runtime_error("broken");
    });
    CHECK(failed.status == sqlock::job_status::failed);
    auto after = runner.run("fails-once", "r1", [&](const sqlock::job_context&) {
        ++calls;
        return std::string("done");
    });
    CHECK(after.status == sqlock::job_status::failed);
    CHECK(calls == 1);
    // Nor does a lost run count towards the limit once a real failure
    // follows: the lost attempt still raised the count, so with 2 allowed,
    // one lost run and one failure left the run failed for good.
    sqlock::job_runner two(db.open(), {.max_attempts = 2, .retry_backoff = std::chrono::milliseconds(0)});
    REQUIRE(two.run("lost-then-fails", "r1", [](const sqlock::job_context&) -> std::string {
                   throw sqlock::lease_lost_error("stopped at the lease's deadline");
               }).status == sqlock::job_status::lost);
    auto transient = two.run("lost-then-fails", "r1", [](const sqlock::job_context&) -> std::string {
        throw std::runtime_error("transient");
    });
    CHECK(transient.status == sqlock::job_status::failed);
    CHECK(transient.retry_in.has_value());  // one real failure of the two allowed
    auto third = two.run("lost-then-fails", "r1", [&](const sqlock::job_context& c) {
        ++calls;
        CHECK(c.attempt == 2);
        return std::string("done");
    });
    CHECK(third.status == sqlock::job_status::ran);
    CHECK(calls == 2);
}

TEST_CASE_TEMPLATE("a claim that committed but answered with a connection error does not count an attempt", Db,
                   ALL_BACKENDS) {
    // The claim's row said "running" under this call's owner, and the body
    // never started; the next caller took it for a dead holder's attempt:
    // with one attempt allowed, failed for good without ever running.
    Db db;
    sqlock::job_runner runner(db.open(), {.max_attempts = 1});
    int calls = 0;
    auto body = [&](const sqlock::job_context& c) {
        ++calls;
        CHECK(c.attempt == 1);
        return std::string("done");
    };
    {
        sqlock::detail::set_fault_hook_for_testing([](sqlock::detail::fault_point p) {
            if (p == sqlock::detail::fault_point::job_claimed)
                throw sqlock::connection_error("injected: the claim's answer was lost");
        });
        CHECK_THROWS_AS((void)runner.run("claim-lost", "r1", body), sqlock::connection_error);
        sqlock::detail::set_fault_hook_for_testing(nullptr);
    }
    CHECK(calls == 0);
    auto out = runner.run("claim-lost", "r1", body);
    CHECK(out.status == sqlock::job_status::ran);
    CHECK(calls == 1);
}

TEST_CASE_TEMPLATE("the run key of a period is its UTC start by the database clock", Db, ALL_BACKENDS) {
    Db db;
    auto client = db.open();
    sqlock::job_runner runner(client);
    const auto before = client.database_time();
    const std::string hourly = runner.run_key(sqlock::every{1h});
    const auto after = client.database_time();
    auto format_hour = [](std::chrono::sys_time<std::chrono::milliseconds> t) {
        const auto day = std::chrono::floor<std::chrono::days>(t);
        const std::chrono::year_month_day ymd(day);
        const auto hour = std::chrono::floor<std::chrono::hours>(t - day).count();
        char buf[32];
        std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:00:00Z", static_cast<int>(ymd.year()),
                      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), static_cast<int>(hour));
        return std::string(buf);
    };
    CHECK((hourly == format_hour(before) || hourly == format_hour(after)));
    const std::string sub = runner.run_key(sqlock::every{1500ms});
    CHECK(sub.size() == std::string("2026-11-21T14:00:01.500Z").size());
    CHECK(sub.back() == 'Z');
    CHECK_THROWS_AS(runner.run_key(sqlock::every{0ms}), sqlock::config_error);

    auto out = runner.run("hourly", sqlock::every{1h}, [](const sqlock::job_context& c) {
        return std::string(c.run_key);
    });
    CHECK(out.status == sqlock::job_status::ran);
    CHECK(out.record.result == out.record.run_key);
}

TEST_CASE_TEMPLATE("bad job names, run keys, results and options are rejected with a reason", Db, ALL_BACKENDS) {
    Db db;
    auto client = db.open_quiet();
    sqlock::job_runner runner(client);
    auto noop = [](const sqlock::job_context&) {};
    client.inspect("warm-up");  // the schema check is done; from here on count statements
    const auto before = client.stats().statements;
    CHECK_THROWS_AS((void)runner.run("", "k", noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("has:colon", "k", noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("tab\there", "k", noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("\xc3\x28", "k", noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run(std::string(101, 'j'), "k", noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("job", "", noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("job", std::string(129, 'k'), noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("job", std::string("a\0b", 3), noop), sqlock::config_error);
    CHECK_THROWS_AS((void)runner.run("job", "\xff\xfe", noop), sqlock::config_error);
    CHECK_THROWS_AS(runner.records("bad:name"), sqlock::config_error);
    CHECK(client.stats().statements == before);
    // Quotes, spaces and SQL in a name are just text: parameters, never SQL.
    const std::string odd_name = "x'; DROP TABLE t; -- $(rm) \"q\"";
    CHECK(runner.run(odd_name, "k", noop).status == sqlock::job_status::ran);
    CHECK(runner.record(odd_name, "k")->status == sqlock::run_status::succeeded);
    CHECK_THROWS_AS(sqlock::job_runner(client, {.max_attempts = 0}), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::job_runner(client, {.lease = 0ms}), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::job_runner(client, {.retry_backoff = 10s, .max_backoff = 1s}), sqlock::config_error);

    // Run keys with quotes and emoji are ordinary run keys.
    CHECK(runner.run("job", "o'brien \"x\" %_ 🦀", noop).status == sqlock::job_status::ran);
    CHECK(runner.record("job", "o'brien \"x\" %_ 🦀")->status == sqlock::run_status::succeeded);

    // A result the database cannot store is a failure of the run, not a crash.
    auto bad = runner.run("job", "bad-result", [](const sqlock::job_context&) { return std::string("\xc3\x28"); });
    CHECK(bad.status == sqlock::job_status::failed);
    CHECK(bad.error.find("not storable") != std::string::npos);
    // An error message that is not UTF-8 is stored cleaned up.
    auto odd = runner.run("job", "odd-error", [](const sqlock::job_context&) -> std::string {
        throw std::runtime_error("bad byte \xff here");
    });
    CHECK(odd.status == sqlock::job_status::failed);
    CHECK(odd.record.last_error == "bad byte ? here");
}

TEST_CASE_TEMPLATE("the sweeper deletes ledger rows older than the retention", Db, ALL_BACKENDS) {
    Db db;
    auto options = db.options();
    options.sweep = false;
    options.job_retention = 1s;
    auto client = sqlock::client::open(db.url(), options);
    sqlock::job_runner runner(client);
    CHECK(runner.run("cleanup", "old", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    CHECK(client.sweep() == 0);  // not old yet
    // A period longer than half the retention could see its row swept while
    // its run key is still handed out or claimed, and its job run again: at
    // a period equal to the retention, a row started as the period began is
    // swept as it ends, under a caller that got the run key a moment before.
    CHECK_THROWS_WITH_AS(runner.run_key(sqlock::every{2s}), doctest::Contains("job_retention"), sqlock::config_error);
    CHECK_THROWS_WITH_AS(runner.run_key(sqlock::every{1s}), doctest::Contains("job_retention"), sqlock::config_error);
    CHECK_NOTHROW(runner.run_key(sqlock::every{500ms}));
    std::this_thread::sleep_for(1200ms);
    CHECK(runner.run("cleanup", "new", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    CHECK(client.sweep() == 1);
    CHECK_FALSE(runner.record("cleanup", "old"));
    CHECK(runner.record("cleanup", "new"));
}

TEST_CASE_TEMPLATE("eight processes running twenty run keys run each exactly once", Db, ALL_BACKENDS) {
    Db db;
    test::temp_dir dir;
    const std::string file = (dir.path / "executions").string();
    std::vector<test::child> workers;
    for (int i = 0; i < 8; ++i)
        workers.emplace_back(std::vector<std::string>{test::worker_path(), "jobs", db.url(), db.prefix, "nightly",
                                                      "20", file});
    int ran = 0, done = 0;
    for (auto& w : workers) {
        const auto r = test::line_or_eof(w.read_line(120s));
        const auto d = test::line_or_eof(w.read_line());
        REQUIRE(r.rfind("ran ", 0) == 0);
        REQUIRE(d.rfind("done ", 0) == 0);
        ran += std::stoi(r.substr(4));
        done += std::stoi(d.substr(5));
        CHECK(w.wait() == 0);
    }
    CHECK(ran == 20);  // across all eight
    CHECK(ran + done <= 8 * 20);

    std::map<std::string, int> executions;
    for (const auto& line : lines_of(file)) ++executions[line.substr(0, line.find(' '))];
    CHECK(executions.size() == 20);
    for (const auto& [run_key, count] : executions) CHECK_MESSAGE(count == 1, run_key);

    auto records = sqlock::job_runner(db.open()).records("nightly");
    CHECK(records.size() == 20);
    std::set<std::string> keys;
    for (const auto& r : records) {
        keys.insert(r.run_key);
        CHECK(r.status == sqlock::run_status::succeeded);
        CHECK(r.attempts == 1);
    }
    CHECK(keys.size() == 20);
}

TEST_CASE_TEMPLATE("a run whose holder is killed with SIGKILL is retried once after its lease expires", Db,
                   ALL_BACKENDS) {
    Db db;
    test::temp_dir dir;
    const std::string file = (dir.path / "executions").string();
    test::child hung({test::worker_path(), "job-hang", db.url(), db.prefix, "invoice", "2026-11", "2000", file});
    const auto line = test::line_or_eof(hung.read_line());
    REQUIRE(line.rfind("running ", 0) == 0);
    const std::int64_t dead_token = std::stoll(line.substr(8));
    hung.signal(SIGKILL);
    hung.wait();

    sqlock::job_runner runner(db.open());
    int calls = 0;
    auto body = [&](const sqlock::job_context& c) {
        ++calls;
        CHECK(c.attempt == 2);
        return std::string("invoiced");
    };
    // The dead holder's lease has not run out yet: the run is busy.
    CHECK(runner.run("invoice", "2026-11", body).status == sqlock::job_status::busy);
    sqlock::job_runner patient(db.open(), {.wait = 30s});
    auto out = patient.run("invoice", "2026-11", body);
    CHECK(out.status == sqlock::job_status::ran);
    CHECK(out.record.attempts == 2);
    CHECK(out.record.token > dead_token);
    CHECK(out.record.last_error.find("did not finish") != std::string::npos);
    CHECK(calls == 1);
    CHECK(lines_of(file).size() == 1);  // the killed attempt's body started once
    CHECK(runner.run("invoice", "2026-11", body).status == sqlock::job_status::already_done);
    CHECK(calls == 1);
}

TEST_CASE_TEMPLATE("a holder frozen past its lease cannot write fenced or record its run, while an unfenced write "
                   "goes through",
                   Db, ALL_BACKENDS) {
    Db db;
    const std::string table = db.table("app_writes");
    db.raw()->exec("CREATE TABLE " + table + " (what VARCHAR(20) NOT NULL, token BIGINT NOT NULL)");
    test::child frozen({test::worker_path(), "job-frozen", db.url(), db.prefix, "payout", "week-47", "1500", table});
    const auto line = test::line_or_eof(frozen.read_line());
    REQUIRE(line.rfind("running ", 0) == 0);
    const std::int64_t frozen_token = std::stoll(line.substr(8));
    frozen.signal(SIGSTOP);

    // Another instance takes over once the frozen holder's lease runs out.
    sqlock::job_runner runner(db.open(), {.wait = 30s});
    auto out = runner.run("payout", "week-47", [](const sqlock::job_context& c) {
        CHECK(c.attempt == 2);
        return std::string("paid by the second instance");
    });
    CHECK(out.status == sqlock::job_status::ran);
    const std::int64_t new_token = out.record.token;
    CHECK(new_token > frozen_token);

    frozen.signal(SIGCONT);
    CHECK(test::line_or_eof(frozen.read_line()) == "fenced rejected");
    CHECK(test::line_or_eof(frozen.read_line()) == "unfenced ok");
    CHECK(test::line_or_eof(frozen.read_line()) == "outcome lost");
    CHECK(frozen.wait() == 0);

    auto app = db.raw();
    const std::string count = "SELECT COUNT(*) FROM " + table + " WHERE token = " + std::to_string(frozen_token);
    CHECK(app->scalar(count + " AND what = 'fenced'") == 0);    // rejected by the fence
    CHECK(app->scalar(count + " AND what = 'unfenced'") == 1);  // what a lock without a fence lets through
    auto record = runner.record("payout", "week-47");
    REQUIRE(record);
    CHECK(record->status == sqlock::run_status::succeeded);
    CHECK(record->result == "paid by the second instance");
    CHECK(record->token == new_token);
    CHECK(record->attempts == 2);
}

}  // TEST_SUITE("jobs")
