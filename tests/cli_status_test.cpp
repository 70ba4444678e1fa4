// The `sqlock` command line, black-box: what it shows and repairs against
// each backend — `status` (a table, JSON, Prometheus gauges, --watch),
// filtering by prefix and bounding every section, and `release --force`
// fencing the holder off; and the strict Prometheus reader those checks use.

#include "support/cli.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"
#include "support/prometheus.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using test::cli;
using test::prometheus;

TEST_SUITE("cli") {

void release_force_fences_holder(const test::backend_base& db) {
    cli sqlock(db);
    auto a = db.open();
    auto b = db.open();
    for (auto m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        auto held = a.try_acquire("k/force", {.mode = m, .lease = 20s});
        REQUIRE(held);
        auto r = sqlock({"release", "--force", "k/force"});
        CHECK(r.status == 0);
        // The holder learns at its next renewal or ping and the key is free
        // long before its 20 s lease would have run out.
        CHECK(test::eventually([&] { return held->lost(); }, 10s));
        std::optional<sqlock::lease> next;
        CHECK(test::eventually([&] { return (next = b.try_acquire("k/force", {.mode = m})).has_value(); }, 10s));
        REQUIRE(next);
        CHECK(next->token() >= held->token() + 2);  // the forced bump sits between them
        next->release();
    }
    auto r = sqlock({"release", "--force", "k/never"});
    CHECK(r.status == 0);
    CHECK(r.out.find("never granted") != std::string::npos);
    r = sqlock({"release", "k/force"});
    CHECK(r.status == 64);
    CHECK(r.one_line_message());
}

CLI_TEST("release --force fences the holder off, in every mode", release_force_fences_holder)

void status_lists_locks_waiters_runs(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open();
    auto held = c.try_acquire("st/a", {.lease = 30s, .note = "nightly report"});
    REQUIRE(held);
    auto other = c.try_acquire("zz/other");
    REQUIRE(other);
    std::vector<std::thread> waiting;
    for (int priority : {1, 5}) {
        waiting.emplace_back([&, priority] {
            auto w = db.open();
            try {
                w.acquire("st/a", 30s, {.fair = true, .priority = priority}).release();
            } catch (const sqlock::error&) {
            }
        });
        REQUIRE(test::eventually([&] { return c.waiters("st/").size() == static_cast<std::size_t>(priority == 1 ? 1 : 2); }));
    }
    CHECK(sqlock({"run", "--run-key", "r1", "st/job", "--", "true"}).status == 0);

    auto r = sqlock({"status", "st/"});
    CHECK(r.status == 0);
    CHECK(r.out.find("HELD LOCKS (1)") != std::string::npos);
    CHECK(r.out.find("nightly report") != std::string::npos);
    CHECK(r.out.find("WAITERS (2)") != std::string::npos);
    CHECK(r.out.find("RECENT JOB RUNS (1)") != std::string::npos);
    CHECK(r.out.find("zz/other") == std::string::npos);

    r = sqlock({"status", "--json", "st/"});
    CHECK(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["locks"].size() == 1);
    CHECK(j["locks"][0]["key"] == "st/a");
    CHECK(j["locks"][0]["token"] == held->token());
    CHECK(j["locks"][0]["mode"] == "conditional_update");
    CHECK(j["locks"][0]["expires_in_ms"].get<std::int64_t>() > 0);
    REQUIRE(j["waiters"].size() == 2);
    CHECK(j["waiters"][0]["priority"] == 5);  // served first
    CHECK(j["waiters"][1]["priority"] == 1);
    CHECK(j["waiters"][0]["fair"] == true);
    REQUIRE(j["runs"].size() == 1);
    CHECK(j["runs"][0]["job"] == "st/job");
    CHECK(j["runs"][0]["status"] == "succeeded");

    r = sqlock({"status", "--json"});
    CHECK(nlohmann::json::parse(r.out)["locks"].size() == 2);
    held->release();
    other->release();
    for (auto& t : waiting) t.join();
}

CLI_TEST("status shows held locks, waiters in order and recent runs, as a table or JSON", status_lists_locks_waiters_runs)

// A key or note may hold any UTF-8 but NUL: a table cell or a message that
// passed ESC or a C1 control (CSI, U+009B) to a terminal would let whoever
// names a key move the cursor, clear the screen or retitle the window of
// whoever runs `sqlock status`. Both come out as visible escapes.
void terminal_controls_escaped(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open();
    const std::string key = "tc/\x1b[2J\xc2\x9b" "31m";
    auto held = c.try_acquire(key, {.note = "\x1b]0;retitled\x07 caf\xc3\xa9"});
    REQUIRE(held);
    auto no_controls = [](const std::string& text) {
        return text.find('\x1b') == std::string::npos && text.find('\x07') == std::string::npos &&
               text.find("\xc2\x9b") == std::string::npos;
    };
    auto r = sqlock({"status", "tc/"});
    CHECK(r.status == 0);
    CAPTURE(r.out);
    CHECK(no_controls(r.out));
    CHECK(r.out.find("tc/\\x1b[2J\\u009b31m") != std::string::npos);
    CHECK(r.out.find("\\x1b]0;retitled\\x07 caf\xc3\xa9") != std::string::npos);  // UTF-8 passes
    // The busy message names the key and its holder on stderr.
    r = sqlock({"run", key, "--", "true"});
    CHECK(r.status == 75);
    CAPTURE(r.err);
    CHECK(r.one_line_message());
    CHECK(no_controls(r.err));
    CHECK(r.err.find("tc/\\x1b[2J\\u009b31m") != std::string::npos);
    // JSON keeps the text exact, for programs (its own escapes).
    r = sqlock({"status", "--json", "tc/"});
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["locks"].size() == 1);
    CHECK(j["locks"][0]["key"] == key);
}

CLI_TEST("status and messages show control characters of keys and notes as escapes", terminal_controls_escaped)

void status_filters_in_the_database(const test::backend_base& db) {
    cli sqlock(db);
    // One run of the job the status asks about, then 1,200 newer runs of
    // another job: a filter applied after reading the newest rows misses it.
    sqlock::job_runner runner(db.open());
    CHECK(runner.run("zzz/target", "r1", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    const std::string runs = db.table("job_runs");
    std::string copy;
    if (db.name() == "postgres")
        copy = "INSERT INTO " + runs + " (job, run_key, status, owner, holder, token, attempts, started_at, finished_at)"
               " SELECT 'aaa/other', 'r' || g, status, owner, holder, token, attempts,"
               " started_at + g * interval '1 second', finished_at FROM " + runs + ", generate_series(1, 1200) g"
               " WHERE job = 'zzz/target'";
    else if (db.name() == "mysql")
        copy = "INSERT INTO " + runs + " (job, run_key, status, owner, holder, token, attempts, started_at, finished_at)"
               " WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1200)"
               " SELECT 'aaa/other', CONCAT('r', n), status, owner, holder, token, attempts,"
               " started_at + INTERVAL n SECOND, finished_at FROM " + runs + ", g WHERE job = 'zzz/target'";
    else
        copy = "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1200)"
               " INSERT INTO " + runs + " (job, run_key, status, owner, holder, token, attempts, started_ms, finished_ms)"
               " SELECT 'aaa/other', 'r' || n, status, owner, holder, token, attempts, started_ms + n * 1000,"
               " finished_ms FROM " + runs + ", g WHERE job = 'zzz/target'";
    auto raw = db.raw();
    if (db.name() == "mysql") raw->exec("SET SESSION max_recursive_iterations = 100000");
    raw->exec(copy);
    auto r = sqlock({"status", "--json", "zzz/"});
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["runs"].size() == 1);
    CHECK(j["runs"][0]["job"] == "zzz/target");
    CHECK(j["truncated"]["runs"] == false);
    // Every section stops at --limit and says so.
    auto holder = db.open();
    std::vector<sqlock::lease> held;
    for (int i = 0; i < 8; ++i) {
        auto l = holder.try_acquire("st/" + std::to_string(i), {.reentrant = false});
        REQUIRE(l);
        held.push_back(std::move(*l));
    }
    r = sqlock({"status", "--limit", "5", "--json"});
    REQUIRE(r.status == 0);
    j = nlohmann::json::parse(r.out);
    CHECK(j["locks"].size() == 5);
    CHECK(j["truncated"]["locks"] == true);
    CHECK(j["runs"].size() == 5);
    CHECK(j["truncated"]["runs"] == true);
    r = sqlock({"status", "--limit", "5"});
    CHECK(r.out.find("HELD LOCKS (5 shown; more not shown: raise --limit)") != std::string::npos);
}

CLI_TEST("status filters by prefix in the database and bounds every section", status_filters_in_the_database)

void status_long_key_prefix(const test::backend_base& db) {
    // A key prefix may be as long as a key (255 bytes), a job name at most
    // 100: the prefix still lists its locks, and no job runs.
    cli sqlock(db);
    auto c = db.open();
    const std::string key(255, 'k');
    auto held = c.try_acquire(key);
    REQUIRE(held);
    sqlock::job_runner runner(c);
    const std::string job(100, 'k');  // a job named with the prefix's first 100 bytes
    CHECK(runner.run(job, "r1", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    for (std::size_t length : {std::size_t(101), std::size_t(255)}) {
        CAPTURE(length);
        auto r = sqlock({"status", "--json", key.substr(0, length)});
        REQUIRE(r.status == 0);
        CHECK(r.err.empty());
        const auto j = nlohmann::json::parse(r.out);
        REQUIRE(j["locks"].size() == 1);
        CHECK(j["locks"][0]["key"] == key);
        CHECK(j["runs"].empty());
        r = sqlock({"status", key.substr(0, length)});
        CHECK(r.status == 0);
        CHECK(r.out.find(key) != std::string::npos);
    }
    // The job's own name still lists its run.
    const auto r = sqlock({"status", "--json", job});
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out)["runs"].size() == 1);
}

CLI_TEST("status takes a key prefix longer than a job name may be, and lists its locks", status_long_key_prefix)

void status_metrics_count_the_database(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open_quiet();  // no sweeps: the expired row below must stay
    // A key whose name needs every escape of a label value.
    const std::string odd = "mt/a \"quoted\" back\\slash\nline";
    auto a = c.try_acquire(odd);
    REQUIRE(a);
    auto b = c.try_acquire("mt/b", {.mode = sqlock::mode::unique_insert});
    REQUIRE(b);
    std::optional<sqlock::lease> row_locked;
    if (db.row_locks()) {
        row_locked = c.try_acquire("mt/c", {.mode = sqlock::mode::select_for_update});
        REQUIRE(row_locked);
    }
    // A unique_insert lease left to expire, its row kept while the lease object lives.
    auto expired = c.try_acquire("mt/expired", {.mode = sqlock::mode::unique_insert, .lease = 300ms, .auto_renew = false});
    REQUIRE(expired);
    REQUIRE(test::eventually([&] { return !c.inspect("mt/expired").held; }));
    sqlock::job_runner runner(c);
    CHECK(runner.run("mt/job", "r1", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    CHECK(runner.run("mt/job", "r2", [](const sqlock::job_context&) { throw std::runtime_error("no"); }).status ==
          sqlock::job_status::failed);
    std::thread waiting([&] {
        auto w = db.open_quiet();
        try {
            w.acquire(odd, 30s, {.fair = true}).release();
        } catch (const sqlock::error&) {
        }
    });
    REQUIRE(test::eventually([&] { return c.waiters("mt/").size() == 1; }));

    const auto before = c.database_time();
    const auto r = sqlock({"status", "--metrics"});
    const auto after = c.database_time();
    a->release();
    waiting.join();
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    prometheus m;
    REQUIRE_NOTHROW(m = prometheus::parse(r.out));
    for (const auto& [name, type] : m.type) {
        CAPTURE(name);
        CHECK(name.starts_with("sqlock_"));
        CHECK(type == "gauge");
        CHECK(m.help.count(name) == 1);
    }
    const std::int64_t held = db.row_locks() ? 3 : 2;
    CHECK(m.value("sqlock_db_keys_held") == held);
    CHECK(m.sum("sqlock_db_holders") == held);
    CHECK(m.value("sqlock_db_holders", {{"mode", "conditional_update"}}) == 1);
    CHECK(m.value("sqlock_db_holders", {{"mode", "unique_insert"}}) == 1);
    CHECK(m.find("sqlock_db_holders", {{"mode", "select_for_update"}}).size() == (db.row_locks() ? 1u : 0u));
    if (db.row_locks()) CHECK(m.value("sqlock_db_holders", {{"mode", "select_for_update"}}) == 1);
    CHECK(m.sum("sqlock_db_waiters") == 1);
    CHECK(m.value("sqlock_db_waiters", {{"fair", "true"}}) == 1);
    CHECK(m.value("sqlock_db_oldest_wait_seconds") >= 0);
    CHECK(m.value("sqlock_db_expired_rows", {{"table", "locks"}}) == 1);
    CHECK(m.value("sqlock_db_expired_rows", {{"table", "waiters"}}) == 0);
    CHECK(m.value("sqlock_db_job_runs", {{"status", "succeeded"}}) == 1);
    CHECK(m.value("sqlock_db_job_runs", {{"status", "failed"}}) == 1);
    CHECK(m.value("sqlock_db_job_runs", {{"status", "running"}}) == 0);
    // The queue, under its key exactly as given, escapes undone.
    REQUIRE(m.find("sqlock_db_queue_waiters").size() == 1);
    CHECK(m.value("sqlock_db_queue_waiters", {{"key", odd}}) == 1);
    CHECK(m.value("sqlock_db_queue_oldest_wait_seconds", {{"key", odd}}) >= 0);
    // Read at the database clock, between the two readings around it.
    const auto at = std::llround(m.value("sqlock_db_time_seconds") * 1000);
    CHECK(at >= before.time_since_epoch().count());
    CHECK(at <= after.time_since_epoch().count());
    CHECK(m.find("sqlock_db_expired_rows").size() == 2);

    // Nothing held, nobody waiting: zeros, and no queue families at all.
    b->release();
    if (row_locked) row_locked->release();
    expired.reset();
    const auto idle = prometheus::parse(sqlock({"status", "--metrics"}).out);
    CHECK(idle.value("sqlock_db_keys_held") == 0);
    CHECK(idle.sum("sqlock_db_waiters") == 0);
    CHECK(idle.value("sqlock_db_oldest_wait_seconds") == 0);
    CHECK(idle.type.count("sqlock_db_queue_waiters") == 0);
}

CLI_TEST("status --metrics: whole-database gauges in the Prometheus text format", status_metrics_count_the_database)

void status_watch_repeats(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open();
    auto held = c.try_acquire("wt/held", {.note = "watched"});
    REQUIRE(held);
    // Two snapshots to a pipe: plain text, a blank line and the timestamp line between them.
    auto watch = sqlock.start({"status", "--watch", "--count", "2", "--interval", "100ms"});
    std::vector<std::string> out;
    while (auto line = watch.read_line(20s)) out.push_back(*line);
    CHECK(watch.wait(10s) == 0);
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < out.size(); ++i) {
        CAPTURE(out[i]);
        CHECK(out[i].find('\x1b') == std::string::npos);  // no terminal codes into a pipe
        if (out[i].starts_with("database time ")) starts.push_back(i);
    }
    REQUIRE(starts.size() == 2);
    CHECK(starts[0] == 0);
    CHECK(out[starts[1] - 1].empty());
    for (auto [from, to] : {std::pair(starts[0], starts[1]), std::pair(starts[1], out.size())}) {
        const auto shown = std::count_if(out.begin() + static_cast<std::ptrdiff_t>(from),
                                         out.begin() + static_cast<std::ptrdiff_t>(to),
                                         [](const std::string& l) { return l.starts_with("wt/held ") && l.find("watched") != std::string::npos; });
        CHECK(shown == 1);
    }
    // Without --count it goes on until a signal: 128 + N, per signal.
    for (int sig : {SIGINT, SIGTERM}) {
        CAPTURE(sig);
        auto endless = sqlock.start({"status", "--watch", "--interval", "100ms"});
        const auto first = endless.read_line(20s);
        REQUIRE(first);
        CHECK(first->starts_with("database time "));
        endless.signal(sig);
        CHECK(endless.wait(20s) == 128 + sig);
    }
    CHECK(c.inspect("wt/held").held);
    // An interval too long to add to the clock was taken: its deadline
    // overflowed into the past, and snapshots came without a pause.
    auto huge = sqlock({"status", "--watch", "--interval", "200000d"});
    CHECK(huge.status == 64);
    CHECK(huge.err.find("--interval must be at most 24 days") != std::string::npos);
}

CLI_TEST("status --watch: a snapshot every --interval, --count times or until a signal", status_watch_repeats)

// What sqlock prints itself must reach its reader: into a full device
// (/dev/full) each command says so in one line and exits 74, where before
// it exited 0, and `status --watch` ends instead of querying the database
// for nobody until a signal.
void output_errors_fail(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open();
    auto held = c.try_acquire("out/held", {.note = "unwritable"});
    REQUIRE(held);
    for (const std::string command : {"status", "status --json", "status --metrics", "migrate --print-sql",
                                      "status --watch --interval 100ms"}) {
        CAPTURE(command);
        // stderr to the pipe the test reads, stdout to the full device.
        auto shell = sqlock.start_shell("\"$0\" " + command + " 2>&1 >/dev/full; echo \"exit $?\"");
        std::vector<std::string> out;
        while (auto line = shell.read_line(20s)) out.push_back(*line);
        CHECK(shell.wait(10s) == 0);
        REQUIRE(out.size() == 2);
        CHECK(out[0] == "sqlock: could not write standard output: No space left on device");
        CHECK(out[1] == "exit 74");
    }
}

CLI_TEST("output that cannot be written is an error (exit 74), and ends status --watch", output_errors_fail)

}  // TEST_SUITE("cli")

TEST_SUITE("unit") {

TEST_CASE("the test's Prometheus reader is strict") {
    const auto good = prometheus::parse(
        "# HELP x_total A \\\\ help\\ntext.\n# TYPE x_total counter\nx_total{k=\"a\\\"b\\\\c\\nd\",m=\"\"} 1.5\nx_total 2\n"
        "# TYPE y gauge\ny -3e2\n");
    CHECK(good.help.at("x_total") == "A \\ help\ntext.");
    CHECK(good.value("x_total", {{"k", "a\"b\\c\nd"}}) == 1.5);
    CHECK(good.value("y") == -300);
    for (const char* bad : {
             "x 1\n",                                    // no TYPE
             "x 1\n# TYPE x gauge\n",                    // TYPE after the sample
             "# TYPE x gauge\n# TYPE x gauge\nx 1\n",    // TYPE twice
             "# TYPE x summary\nx 1\n",                  // a type not allowed here
             "# TYPE x gauge\nx 1",                      // no final line feed
             "# TYPE x gauge\n\nx 1\n",                  // an empty line
             "# TYPE x gauge\n# a comment\nx 1\n",       // a comment
             "# TYPE 1x gauge\n1x 1\n",                  // invalid name
             "# TYPE x gauge\nx{1k=\"v\"} 1\n",          // invalid label name
             "# TYPE x gauge\nx{__k=\"v\"} 1\n",        // reserved label name
             "# TYPE x gauge\nx{k=v} 1\n",               // unquoted value
             "# TYPE x gauge\nx{k=\"a\\tb\"} 1\n",     // undefined escape
             "# TYPE x gauge\nx{k=\"v\",k=\"w\"} 1\n",  // label twice
             "# TYPE x gauge\nx{k=\"v\",} 1\n",         // trailing comma
             "# TYPE x gauge\nx 1\nx 2\n",               // the same series twice
             "# TYPE x gauge\nx one\n",                  // not a number
             "# TYPE x gauge\nx  1\n",                   // two spaces
             "# TYPE x gauge\nx 1 1700000000\n",         // a timestamp
             "# HELP x a \\q\n# TYPE x gauge\nx 1\n",  // undefined escape in HELP
             "# TYPE x gauge\n# TYPE y gauge\nx 1\n",    // x's lines not together
         }) {
        CAPTURE(bad);
        CHECK_THROWS_AS(prometheus::parse(bad), std::runtime_error);
    }
}

}  // TEST_SUITE("unit")
