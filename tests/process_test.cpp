// Multi-process behaviour: several OS processes (tests/worker.cpp) contend
// for the same keys through real databases. Mutual exclusion, fencing and
// expiry are proved across processes, with killed holders and skewed clocks.

#include "support/doctest_types.hpp"
#include "support/faketime.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace {



bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The integer after `prefix` in `line` ("token 17" -> 17); -1 when absent.
std::int64_t number_after(const std::string& line, const std::string& prefix) {
    if (!starts_with(line, prefix)) return -1;
    try {
        return std::stoll(line.substr(prefix.size()));
    } catch (const std::exception&) {
        return -1;
    }
}

// SQL giving a column of the key's lock row as a number on the database's own
// clock (microseconds on the servers, milliseconds on SQLite), so that two
// such values compare by database time. what: "expires" or "acquired".
std::string db_time_sql(const test::backend_base& db, const std::string& what, const std::string& key) {
    const std::string where = " FROM " + db.table("locks") + " WHERE lock_key = '" + key + "'";
    if (db.name() == "postgres")
        return "SELECT floor(extract(epoch FROM " + what + "_at) * 1000000)::bigint" + where;
    if (db.name() == "mysql")
        // Pure DATETIME arithmetic: no session time zone is involved.
        return "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + what + "_at)" + where;
    return "SELECT " + what + "_ms" + where;
}

// Four worker processes run `counter` ITERATIONS times each on one key and
// one file, and the file's history shows that the lock alone serialised them.
template <class Db>
void check_counter_race(sqlock::mode m) {
    constexpr int workers = 4;
    constexpr int iterations = 200;
    Db db;
    test::temp_dir dir;
    const std::string file = (dir.path / "counter").string();
    { std::ofstream(file) << 0 << "\n"; }
    const std::string key = "process/counter";

    std::vector<test::child> children;
    for (int i = 0; i < workers; ++i)
        children.emplace_back(std::vector<std::string>{test::worker_path(), "counter", db.url(), db.prefix, key,
                                                       sqlock::to_string(m), std::to_string(iterations), file});
    for (auto& c : children) {
        CHECK(test::line_or_eof(c.read_line(120s)) == "done " + std::to_string(iterations));
        CHECK(c.wait() == 0);
    }

    const auto [count, tokens, owners] = test::read_counter_history(file);
    CHECK(count == workers * iterations);

    REQUIRE(tokens.size() == static_cast<std::size_t>(workers * iterations));
    CHECK(owners.size() == tokens.size());  // a fresh random owner per grant
    CHECK(tokens.front() > 0);
    // Lines are appended under the lock, so file order is grant order.
    std::size_t out_of_order = 0;
    for (std::size_t i = 1; i < tokens.size(); ++i)
        if (tokens[i] <= tokens[i - 1]) ++out_of_order;
    CHECK(out_of_order == 0);
    // No grant went unrecorded: the key's counter stopped at the last token.
    CHECK(db.open().inspect(key).token == tokens.back());
}

// A `hold` worker takes the key with a short lease and is killed with SIGKILL:
// the lease keeps the key until it runs out by database time, then the key
// goes to the next owner with a larger token.
template <class Db>
void check_killed_lease_holder(sqlock::mode m) {
    Db db;
    auto c = db.open();
    auto raw = db.raw();
    const std::string key = std::string("process/killed/") + sqlock::to_string(m);

    test::child holder({test::worker_path(), "hold", db.url(), db.prefix, key, sqlock::to_string(m), "1500"});
    const std::string first = test::line_or_eof(holder.read_line(30s));
    const std::int64_t old_token = number_after(first, "token ");
    REQUIRE_MESSAGE(old_token > 0, first);

    holder.signal(SIGKILL);
    REQUIRE(holder.wait(10s) == 128 + SIGKILL);
    // Read once nobody can renew the dead lease any more.
    const std::int64_t old_expiry = raw->scalar(db_time_sql(db, "expires", key));
    REQUIRE(old_expiry > 0);

    // Nothing released the lease: it still holds the key by database time.
    CHECK_FALSE(c.try_acquire(key, {.mode = m}));
    const auto info = c.inspect(key);
    CHECK(info.held);
    CHECK(info.token == old_token);
    CHECK(info.mode == std::string(sqlock::to_string(m)));
    CHECK(info.expires_in > 0ms);
    CHECK(info.holder.find(":" + std::to_string(holder.pid()) + ":") != std::string::npos);

    auto next = c.acquire(key, 10s, {.mode = m});
    CHECK(next.token() > old_token);
    // The takeover happened no earlier than the dead lease's expiry, both
    // read from the database clock.
    CHECK(raw->scalar(db_time_sql(db, "acquired", key)) >= old_expiry);
}

// Line of the clock worker with its token blanked, for comparing runs.
std::string line_kind(const std::string& line) {
    if (starts_with(line, "child-holds ") && number_after(line, "child-holds ") > 0) return "child-holds N";
    return line;
}

// Seconds by which test::faketime::env(OFFSET) moves a child's wall clock.
std::int64_t faketime_skew(const std::string& offset) {
    test::child date({"date", "+%s"}, test::faketime::env(offset));
    const auto line = date.read_line(10s);
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    date.wait(10s);
    if (!line) return 0;
    return std::stoll(*line) - static_cast<std::int64_t>(now);
}

}  // namespace

TEST_SUITE("process") {

TEST_CASE_TEMPLATE("four processes counting under unique_insert never lose an update", Db, ALL_BACKENDS) {
    check_counter_race<Db>(sqlock::mode::unique_insert);
}

TEST_CASE_TEMPLATE("four processes counting under conditional_update never lose an update", Db, ALL_BACKENDS) {
    check_counter_race<Db>(sqlock::mode::conditional_update);
}

TEST_CASE_TEMPLATE("four processes counting under select_for_update never lose an update", Db, SERVER_BACKENDS) {
    check_counter_race<Db>(sqlock::mode::select_for_update);
}

TEST_CASE_TEMPLATE("a unique_insert holder killed with SIGKILL keeps the key until its lease expires by database time",
                   Db, ALL_BACKENDS) {
    check_killed_lease_holder<Db>(sqlock::mode::unique_insert);
}

TEST_CASE_TEMPLATE(
    "a conditional_update holder killed with SIGKILL keeps the key until its lease expires by database time", Db,
    ALL_BACKENDS) {
    check_killed_lease_holder<Db>(sqlock::mode::conditional_update);
}

TEST_CASE_TEMPLATE("a select_for_update holder killed with SIGKILL frees the key and its token is not reused", Db,
                   SERVER_BACKENDS) {
    Db db;
    auto c = db.open();
    auto raw = db.raw();
    const std::string key = "process/killed/select_for_update";
    constexpr auto sfu = sqlock::mode::select_for_update;

    test::child holder({test::worker_path(), "hold", db.url(), db.prefix, key, "select_for_update", "1500"});
    const std::string first = test::line_or_eof(holder.read_line(30s));
    const std::int64_t old_token = number_after(first, "token ");
    REQUIRE_MESSAGE(old_token > 0, first);

    // While the holder lives, its row lock excludes every mode.
    CHECK_FALSE(c.try_acquire(key, {.mode = sfu}));
    CHECK_FALSE(c.try_acquire(key, {.mode = sqlock::mode::conditional_update}));
    const auto info = c.inspect(key);
    CHECK(info.held);
    CHECK(info.mode == "select_for_update");
    CHECK(info.token == old_token);

    holder.signal(SIGKILL);
    REQUIRE(holder.wait(10s) == 128 + SIGKILL);

    // The server rolls the holder's transaction back when its connection
    // drops; the token it drew must stay consumed all the same.
    auto next = c.acquire(key, 10s, {.mode = sfu});
    CHECK(next.token() > old_token);
    CHECK(raw->scalar("SELECT token FROM " + db.table("fences") + " WHERE lock_key = '" + key + "'") ==
          next.token());
}

TEST_CASE_TEMPLATE("a client whose wall clock is an hour off sees the same leases as everyone else", Db,
                   ALL_BACKENDS) {
    // On SQLite "database time" is the host's clock, which sqlock reads with
    // the raw clock_gettime system call, so a process whose libc clock is
    // faked agrees with the others all the same.

    // Guard: faketime really moves a child's wall clock, so that this test
    // cannot pass because the skew never happened.
    const auto ahead = faketime_skew("+1h");
    CHECK(ahead >= 3590);
    CHECK(ahead <= 3610);
    const auto behind = faketime_skew("-1h");
    CHECK(behind >= -3610);
    CHECK(behind <= -3590);

    Db db;
    auto c = db.open();
    const std::string key = "process/clock";
    auto parent = c.try_acquire(key, {.lease = 30s});
    REQUIRE(parent);

    std::vector<std::vector<std::string>> runs;
    for (const std::string& offset : std::vector<std::string>{"", "+1h", "-1h"}) {
        CAPTURE(offset);
        // Under AddressSanitizer, libfaketime is preloaded ahead of the ASan
        // runtime; tell ASan that this is intended.
        std::vector<std::string> env{"ASAN_OPTIONS=verify_asan_link_order=0"};
        if (!offset.empty()) std::ranges::copy(test::faketime::env(offset), std::back_inserter(env));
        test::child child({test::worker_path(), "clock", db.url(), db.prefix, key, "1500"}, env);
        std::vector<std::string> seen;

        // An hour ahead, a wall-clock comparison would call our 30 s lease expired.
        seen.push_back(test::line_or_eof(child.read_line(30s)));
        CHECK(seen.back() == "try busy");

        seen.push_back(test::line_or_eof(child.read_line(30s)));
        const std::int64_t child_token = number_after(seen.back(), "child-holds ");
        REQUIRE_MESSAGE(child_token > 0, seen.back());
        // An hour behind, a wall-clock expiry would already be in the past.
        CHECK_FALSE(c.try_acquire(key + "/child"));
        // An hour ahead, a wall-clock expiry would keep us out for an hour.
        auto taken = c.acquire(key + "/child", 10s);
        CHECK(taken.token() > child_token);
        taken.release();

        seen.push_back(test::line_or_eof(child.read_line(30s)));
        CHECK(seen.back() == "lost 1");
        seen.push_back(test::line_or_eof(child.read_line(30s)));
        CHECK(seen.back() == "renew 0");
        CHECK(child.wait() == 0);

        std::vector<std::string> kinds;
        for (const auto& l : seen) kinds.push_back(line_kind(l));
        runs.push_back(kinds);
    }
    REQUIRE(runs.size() == 3);
    CHECK(runs[1] == runs[0]);
    CHECK(runs[2] == runs[0]);
    // The parent's lease was never disturbed by the skewed children.
    CHECK_FALSE(parent->lost());
    CHECK(parent->renew());
}

TEST_CASE_TEMPLATE("a waiter whose wall clock is an hour off keeps its place against newcomers", Db, ALL_BACKENDS) {
    // The queue's arrival time is database time too: an hour ahead, a
    // waiter's arrival read from its own clock would look an hour from now,
    // and every newcomer could pass it for that hour (not fair mode lets a
    // newcomer pass only a waiter that arrived within the last 2 ms).
    Db db;
    auto c = db.open();
    const std::string key = "process/clock-queue";
    auto held = c.try_acquire(key, {.lease = 30s});
    REQUIRE(held);
    std::vector<std::string> env{"ASAN_OPTIONS=verify_asan_link_order=0"};
    std::ranges::copy(test::faketime::env("+1h"), std::back_inserter(env));
    test::child waiter({test::worker_path(), "wait-key", db.url(), db.prefix, key}, env);
    REQUIRE(test::eventually([&] { return c.waiters(key).size() == 1; }, 30s));
    std::this_thread::sleep_for(50ms);  // well past the 2 ms
    const auto queued = c.waiters(key);
    REQUIRE(queued.size() == 1);
    CHECK(queued[0].waited >= 40ms);
    CHECK(queued[0].waited < 30s);
    held->release();
    // The waiter's turn, not this newcomer's. The newcomer may still win the
    // key after the waiter (which releases it as soon as it has it; on SQLite
    // within a millisecond, so a CHECK that the newcomer fails raced it):
    // the order of the tokens tells who came first.
    auto newcomer = c.try_acquire(key);
    const auto waiter_token = number_after(test::line_or_eof(waiter.read_line(30s)), "granted ");
    CHECK(waiter_token == held->token() + 1);
    if (newcomer) CHECK(newcomer->token() > waiter_token);
    CHECK(waiter.wait() == 0);
}

TEST_CASE_TEMPLATE("four processes migrating a new prefix at once all succeed", Db, ALL_BACKENDS) {
    Db db;  // for its database; the workers migrate prefixes nobody created yet
    const int required = db.open().required_schema_version();
    REQUIRE(required > 0);

    // A few rounds, each on a fresh prefix: an unserialised migration loses
    // the race only some of the time.
    for (int round = 0; round < 5; ++round) {
        const std::string prefix = "m" + test::random_hex(10) + "_";
        CAPTURE(prefix);
        std::vector<test::child> children;
        for (int i = 0; i < 4; ++i)
            children.emplace_back(std::vector<std::string>{test::worker_path(), "migrate", db.url(), prefix});
        for (auto& c : children) {
            CHECK(test::line_or_eof(c.read_line(60s)) == "version " + std::to_string(required));
            CHECK(c.wait() == 0);
        }

        sqlock::client_options o;
        o.table_prefix = prefix;
        auto migrated = sqlock::client::open(db.url(), o);
        CHECK(migrated.schema_version() == required);
        auto l = migrated.try_acquire("process/after-migrate");
        REQUIRE(l);
        CHECK(l->token() > 0);
    }
}

}  // TEST_SUITE("process")
