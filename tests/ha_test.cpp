// sqlock on the replicated and pooled topologies users run: a PostgreSQL
// primary with a synchronous (or asynchronous) standby and a failover, a
// three-node MariaDB Galera cluster with a node killed, PgBouncer in
// transaction pooling mode. Run by scripts/ha.sh smoke, which starts the
// topology and exports SQLOCK_TEST_HA_*; without them these cases fail (they
// are not registered as ctest entries of their own).

#include "support/backends.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sqlock::mode;

namespace {

// Runs scripts/ha.sh WORDS against the topology of this run.
void ha(const std::string& words) {
    const std::string cmd = "bash '" + test::env_or_throw("SQLOCK_TEST_HA_SCRIPT") + "' " + words + " '" +
                            test::env_or_throw("SQLOCK_TEST_HA_DIR") + "' >&2";
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "ha.sh " << words << " failed");
}

sqlock::client open(const std::string& url, const std::string& prefix,
                    std::chrono::milliseconds statement_timeout = 10s) {
    sqlock::client_options o;
    o.table_prefix = prefix;
    o.statement_timeout = statement_timeout;
    o.connect_timeout = 2s;
    return sqlock::client::open(url, o);
}

std::string new_prefix() { return "h" + test::random_hex(8) + "_"; }

// What the ha-counter workers reported, summed.
struct counter_run {
    int done = 0, errors = 0, lost = 0;
};

// WORKERS ha-counter processes (worker i on urls[i % urls.size()] first)
// run ITERATIONS turns each on one key; `during` runs while they do. Then
// the counter file must show that the lock alone serialised them: its
// count is every turn, and tokens rise strictly in file (grant) order.
template <class During>
counter_run check_counter(const std::vector<std::string>& urls, const std::string& prefix, mode m, int workers,
                          int iterations, std::chrono::milliseconds lease, During during) {
    test::temp_dir dir;
    const std::string file = (dir.path / "counter").string();
    { std::ofstream(file) << 0 << "\n"; }
    const std::string key = "ha/counter";
    std::vector<test::child> children;
    for (int i = 0; i < workers; ++i) {
        std::string list;
        for (std::size_t j = 0; j < urls.size(); ++j) list += (j ? " " : "") + urls[(i + j) % urls.size()];
        children.emplace_back(std::vector<std::string>{test::worker_path(), "ha-counter", list, prefix, key,
                                                       sqlock::to_string(m), std::to_string(iterations), file,
                                                       std::to_string(lease.count())});
    }
    during(file);
    counter_run run;
    for (auto& c : children) {
        const auto done = test::line_or_eof(c.read_line(170s));
        CHECK(done == "done " + std::to_string(iterations));
        for (auto [word, total] : {std::pair{"errors ", &run.errors}, std::pair{"lost ", &run.lost}}) {
            const auto line = test::line_or_eof(c.read_line(5s));
            if (line.rfind(word, 0) == 0) *total += std::stoi(line.substr(std::string(word).size()));
        }
        CHECK(c.wait() == 0);
        run.done += iterations;
    }
    const auto [count, tokens, owners] = test::read_counter_history(file);
    CHECK(count == workers * iterations);
    REQUIRE(tokens.size() == static_cast<std::size_t>(workers * iterations));
    std::size_t out_of_order = 0;
    for (std::size_t i = 1; i < tokens.size(); ++i)
        if (tokens[i] <= tokens[i - 1]) ++out_of_order;
    CHECK(out_of_order == 0);
    // Every grant the workers were told of is in the key's counter.
    auto c = open(urls.front(), prefix);
    CHECK(c.inspect(key).token >= tokens.back());
    MESSAGE(std::string(sqlock::to_string(m)) << ": " << count << " increments, " << run.errors << " errors retried, " << run.lost
                                 << " leases lost, last token " << tokens.back());
    return run;
}

// Waits (up to a minute) until the counter in `file` reaches n.
void wait_for_count(const std::string& file, long n) {
    CHECK(test::eventually(
        [&] {
            long value = 0;
            std::ifstream(file) >> value;
            return value >= n;
        },
        60s));
}

// select_for_update is refused with a config_error that names the reason
// (`why`) and the modes to use instead.
void check_row_locks_refused(const std::string& url, const std::string& why) {
    auto c = open(url, new_prefix());
    c.migrate();
    CHECK_FALSE(c.capabilities().row_locks);
    try {
        (void)c.try_acquire("ha/row-locks", {.mode = mode::select_for_update});
        FAIL("expected config_error");
    } catch (const sqlock::config_error& e) {
        CHECK(std::string(e.what()).find(why) != std::string::npos);
        CHECK(std::string(e.what()).find("conditional_update") != std::string::npos);
    }
}

bool full() {
    const char* v = std::getenv("SQLOCK_TEST_HA_FULL");
    return v && std::string(v) == "1";
}

std::vector<std::string> galera_urls() {
    std::vector<std::string> out;
    std::istringstream words(test::env_or_throw("SQLOCK_TEST_HA_GALERA_URLS"));
    for (std::string u; words >> u;) out.push_back(u);
    return out;
}

}  // namespace

TEST_SUITE("ha") {

// ---------------------------------------------------------------------------
// PostgreSQL primary + synchronous standby (ha.sh start replica)
// ---------------------------------------------------------------------------

TEST_CASE("replica-sync: a commit waiting for a stopped synchronous standby ends within the client's bound") {
    const auto url = test::env_or_throw("SQLOCK_TEST_HA_PG_URL");
    REQUIRE(test::env_or_throw("SQLOCK_TEST_HA_PG_SYNC") == "1");
    const auto prefix = new_prefix();
    auto c = open(url, prefix, 1s);
    c.migrate();
    ha("pause-standby");
    // The commit waits in SyncRep, which statement_timeout does not end: the
    // client cancels it and reports the grant as failed, not as held.
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS((void)c.try_acquire("ha/syncrep", {.lease = 2s}), sqlock::connection_error);
    const auto waited = std::chrono::steady_clock::now() - start;
    ha("resume-standby");
    MESSAGE("the grant failed after " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
                                      << " ms (statement_timeout 1 s)");
    // No wall-clock bound is asserted: without the client's cancel the call
    // above never returns (the test would hang until ctest's timeout), and
    // the throw says it ended, as a failure.
    // Its row expires; nothing was acknowledged, so nothing can be issued twice.
    auto l = c.acquire("ha/syncrep", 60s, {.lease = 5s});
    CHECK(l.token() >= 1);
}

TEST_CASE("replica-sync: a failover loses no acknowledged grant; leases survive it or are reported lost") {
    const auto url = test::env_or_throw("SQLOCK_TEST_HA_PG_URL");
    const auto prefix = new_prefix();
    auto c = open(url, prefix);
    c.migrate();
    // Held across the failover: a long lease survives, a short one (the
    // failover takes longer: GAP below) is lost and said to be.
    auto survivor = c.acquire("ha/survivor", 5s, {.lease = 20s});
    auto short_lived = c.acquire("ha/short", 5s, {.lease = 1500ms});
    auto row_lock = c.acquire("ha/row-lock", 5s, {.mode = mode::select_for_update, .lease = 20s});
    const auto before = c.inspect("ha/survivor").token;

    const int turns = full() ? 1000 : 250;
    const auto run = check_counter({url}, prefix, mode::conditional_update, 4, turns, 5s, [&](const std::string& file) {
        wait_for_count(file, turns);  // a quarter of the run
        ha("failover " + std::string(full() ? "3" : "2.5"));  // the GAP
    });
    CHECK(run.errors >= 0);
    // The select_for_update holder's row lock died with the old primary:
    // said at its next check, before the lease the row lock stands for.
    CHECK(test::eventually([&] { return row_lock.lost(); }, 5s));
    CHECK(short_lived.lost());
    CHECK_FALSE(survivor.lost());
    CHECK_NOTHROW(survivor.renew());
    // Tokens go on rising on the new primary.
    auto after = c.acquire("ha/survivor-next", 10s);
    auto again = c.acquire("ha/short", 10s, {.lease = 5s});
    CHECK(again.token() > short_lived.token());
    CHECK(c.inspect("ha/survivor").token == before);
    CHECK_NOTHROW(survivor.release());
}

// ---------------------------------------------------------------------------
// PostgreSQL primary + asynchronous standby (ha.sh start async-replica)
// ---------------------------------------------------------------------------

TEST_CASE("replica-async: a failover can lose an acknowledged grant, and its token is issued twice") {
    const auto url = test::env_or_throw("SQLOCK_TEST_HA_PG_URL");
    REQUIRE(test::env_or_throw("SQLOCK_TEST_HA_PG_SYNC") == "0");
    const auto prefix = new_prefix();
    auto c = open(url, prefix);
    c.migrate();
    const auto first = c.acquire("ha/async", 5s, {.lease = 2s});
    const auto acknowledged = first.token();
    // The standby is down: an asynchronous primary commits on without it.
    ha("stop-standby");
    auto second = c.acquire("ha/async-other", 5s, {.lease = 60s});
    const auto lost_token = [&] {
        auto raw = test::raw_connection_for(url);
        return raw->scalar("SELECT token FROM " + prefix + "fences WHERE lock_key = 'ha/async-other'");
    }();
    REQUIRE(lost_token == second.token());
    ha("failover 0");  // crashes the primary, starts the standby, promotes it
    // The new primary never saw the grant of ha/async-other: the key is free
    // and its next grant repeats the token the lost grant was told.
    auto other = open(url, prefix);
    auto repeat = other.acquire("ha/async-other", 10s, {.lease = 5s});
    MESSAGE("acknowledged token " << second.token() << ", issued again after the failover as " << repeat.token());
    CHECK(repeat.token() <= second.token());
    CHECK(other.inspect("ha/async").token == acknowledged);  // what was replicated before stays
    (void)first;
}

// ---------------------------------------------------------------------------
// MariaDB Galera, three nodes (ha.sh start galera)
// ---------------------------------------------------------------------------

TEST_CASE("Galera: select_for_update is refused with what to do") {
    check_row_locks_refused(galera_urls().front(), "Galera");
}

// A reader joining a live group on one node wrote no row that the group's
// last release on another node wrote: both passed certification, the lock
// row was left free while the joined reader's lease was live, and a writer
// on a third node was granted the key inside that reader's run (found in
// review, with sqlock run on three nodes). Refused until a join writes the
// lock row.
TEST_CASE("Galera: reader-writer locks are refused with what to do; permits and exclusive locks work") {
    auto c = open(galera_urls().front(), new_prefix());
    c.migrate();
    CHECK_FALSE(c.capabilities().shared_locks);
    for (const bool wait : {false, true}) {
        try {
            if (wait)
                (void)c.acquire_shared("ha/shared", 1s);
            else
                (void)c.try_acquire_shared("ha/shared");
            FAIL("expected config_error");
        } catch (const sqlock::config_error& e) {
            CHECK(std::string(e.what()).find("Galera") != std::string::npos);
            CHECK(std::string(e.what()).find("exclusive locks") != std::string::npos);
        }
    }
    CHECK(c.waiters("ha/shared").empty());  // the refused wait left no ticket
    auto permit = c.try_acquire_permit("ha/permits", 2);
    CHECK(permit);
    auto exclusive = c.try_acquire("ha/shared");
    CHECK(exclusive);
}

TEST_CASE("Galera: concurrent migrations on every node serialise") {
    const auto urls = galera_urls();
    const auto prefix = new_prefix();
    std::vector<test::child> children;
    for (int i = 0; i < 6; ++i)
        children.emplace_back(
            std::vector<std::string>{test::worker_path(), "migrate", urls[static_cast<std::size_t>(i) % urls.size()],
                                     prefix});
    std::set<std::string> versions;
    for (auto& c : children) {
        versions.insert(test::line_or_eof(c.read_line(120s)));
        CHECK(c.wait() == 0);
    }
    CHECK(versions.size() == 1);
    for (const auto& url : urls) CHECK(open(url, prefix).schema_version() > 0);
}

TEST_CASE("Galera: clients on three nodes exclude each other, also when a node dies") {
    const auto urls = galera_urls();
    const auto prefix = new_prefix();
    open(urls.front(), prefix).migrate();
    for (mode m : {mode::conditional_update, mode::unique_insert})
        check_counter(urls, prefix, m, 6, full() ? 150 : 40, 20s, [](const std::string&) {});
    // One node killed mid-run: its clients move to the others, the others go
    // on granting (after Galera evicts the dead node), tokens keep rising.
    const int turns = full() ? 150 : 40;
    const auto run = check_counter(urls, prefix, mode::conditional_update, 6, turns, 20s, [&](const std::string& file) {
        wait_for_count(file, 6 * turns / 4);
        ha("kill-node 3");
    });
    MESSAGE("node 3 killed: " << run.errors << " errors retried elsewhere");
    ha("restart-node 3");
}

// ---------------------------------------------------------------------------
// PgBouncer, pool_mode = transaction (ha.sh start pgbouncer)
// ---------------------------------------------------------------------------

TEST_CASE("PgBouncer: select_for_update and LISTEN are off, and say why") {
    const auto url = test::env_or_throw("SQLOCK_TEST_HA_PGBOUNCER_URL");
    check_row_locks_refused(url, "sqlock_pool_mode=transaction");
    CHECK_FALSE(open(url, new_prefix()).capabilities().wake_ups);
    CHECK_THROWS_AS(sqlock::client::open("postgresql://127.0.0.1:1/x?sqlock_pool_mode=statement"),
                    sqlock::config_error);
    CHECK_THROWS_AS(sqlock::client::open("postgresql://127.0.0.1:1/x?sqlock_pool_mode=yes"), sqlock::config_error);
}

TEST_CASE("PgBouncer: session settings stay per transaction") {
    // A sqlock client sets its statement timeout in each transaction; another
    // client of the pool that shares the server session sees the server's.
    const auto url = test::env_or_throw("SQLOCK_TEST_HA_PGBOUNCER_URL");
    const auto prefix = new_prefix();
    auto c = open(url, prefix, 1234ms);
    c.migrate();
    for (int i = 0; i < 20; ++i) (void)c.try_acquire("ha/settings/" + std::to_string(i));
    auto raw = test::raw_connection_for(url);
    for (int i = 0; i < 20; ++i) CHECK(raw->rows("SHOW statement_timeout")[0][0] == "0");
}

TEST_CASE("PgBouncer: processes contend through the pool with leases, renewals and fair waiting") {
    const auto url = test::env_or_throw("SQLOCK_TEST_HA_PGBOUNCER_URL");
    const auto prefix = new_prefix();
    open(url, prefix).migrate();
    for (mode m : {mode::conditional_update, mode::unique_insert})
        check_counter({url}, prefix, m, 4, full() ? 300 : 100, 5s, [](const std::string&) {});
    // The watchdog renews through the pool.
    auto c = open(url, prefix);
    auto l = c.acquire("ha/renewed", 5s, {.lease = 900ms});
    std::this_thread::sleep_for(2500ms);
    CHECK_FALSE(l.lost());
    CHECK(c.stats().renewals >= 3);
    // A fair waiter gets the key when it is released.
    auto other = open(url, prefix);
    std::int64_t waited_token = 0;
    {
        std::jthread waiter([&] { waited_token = other.acquire("ha/renewed", 20s, {.lease = 5s, .fair = true}).token(); });
        std::this_thread::sleep_for(300ms);
        CHECK_NOTHROW(l.release());
    }
    CHECK(waited_token > l.token());
}

}  // TEST_SUITE
