// Fair queuing: the waiter table, priorities, crashed waiters, wake-ups.

#include "support/dialect.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include "dialects/dialect.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::int64_t waiting(const test::backend_base& db, test::raw_connection& raw, const std::string& key) {
    return raw.scalar("SELECT COUNT(*) FROM " + db.table("waiters") + " WHERE lock_key = '" + key + "'");
}



// Whether `clients` wake-up listeners of this prefix are in their wait.
// MariaDB's listener thread starts its SLEEP just after the client's first
// ticket; a ring interrupts it there, and one that comes before is seen by
// the SLEEP's statement itself (schema version 13). The tests wait for the
// SLEEP so that the interrupt is what they exercise. The other backends'
// listeners are registered before the ticket is taken.
bool listening(const test::backend_base& db, test::raw_connection& raw, int clients) {
    if (db.name() != "mysql") return true;
    return raw.scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(%" +
                      db.prefix + "w%'") >= clients;
}

// MariaDB: how many waiting clients' channels are held, as named locks, by
// the very connection in that channel's SLEEP: how a release finds whom to
// interrupt (migrations/mysql/0010_doorbell_lock.sql). Other backends: all.
std::int64_t bells_held(const test::backend_base& db, test::raw_connection& raw, std::int64_t clients) {
    if (db.name() != "mysql") return clients;
    return raw.scalar("SELECT COUNT(DISTINCT w.listener) FROM " + db.table("waiters") +
                      " w JOIN information_schema.PROCESSLIST p ON p.ID = IS_USED_LOCK(w.listener)"
                      " AND p.INFO LIKE CONCAT('SELECT SLEEP(%', w.listener, '%')");
}

// MariaDB: whether the listener of `channel` is asleep in its SLEEP in the
// server (it shows in the process list), where a KILL QUERY interrupts it.
bool asleep(test::raw_connection& raw, const std::string& channel) {
    return raw.scalar("SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP(%" + channel +
                      "%' AND state = 'User sleep'") == 1;
}

// Holds `key` for "holder" on `holder` (conditional_update, 60 s) and queues a
// fair waiter on `waiter` whose doorbell is `channel`, with the waiter's try
// after it queued: it clears MariaDB's lean flag, so that the release rings
// (as in a client's acquire()). Returns the waiter's ticket.
std::int64_t held_and_queued(sqlock::detail::session& holder, sqlock::detail::session& waiter, const std::string& key,
                             const std::string& channel) {
    REQUIRE(holder.grant({.key = key, .owner = "holder", .mode = sqlock::mode::conditional_update,
                          .lease_ms = 60'000, .holder = "test", .note = "", .want_remaining = false})
                .token);
    const auto ticket = waiter.enqueue({.key = key, .kind = 'X', .owner = "waiter", .fair = true, .priority = 0,
                                        .lease_ms = 60'000, .listener = channel, .holder = "test"});
    CHECK_FALSE(waiter.grant({.key = key, .owner = "waiter", .mode = sqlock::mode::conditional_update,
                              .lease_ms = 60'000, .holder = "test", .note = "", .want_remaining = false,
                              .ticket = ticket, .priority = 0})
                    .token);
    return ticket;
}

std::vector<std::string> lines_of(const std::filesystem::path& file) {
    std::vector<std::string> out;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

// Starts a fair waiter process and returns once its ticket is in the queue,
// so that arrival order is the order of these calls.
test::child enqueue_worker(const test::backend_base& db, test::raw_connection& raw, const std::string& key,
                           int priority, int lease_ms, const std::string& id, const std::filesystem::path& file) {
    const auto before = waiting(db, raw, key);
    test::child c({test::worker_path(), "fair", db.url(), db.prefix, key, std::to_string(priority),
                   std::to_string(lease_ms), id, file.string()});
    REQUIRE(test::eventually([&] { return waiting(db, raw, key) == before + 1; }));
    return c;
}

}  // namespace

TEST_SUITE("fair") {

TEST_CASE_TEMPLATE("sixteen waiters in four or more processes are granted in arrival order", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    test::temp_dir dir;
    const auto file = dir.path / "order";
    auto holder = db.open();
    auto held = holder.try_acquire("queue");
    REQUIRE(held);
    std::vector<test::child> waiters;
    for (int i = 0; i < 16; ++i)
        waiters.push_back(enqueue_worker(db, *raw, "queue", 0, 5000, std::to_string(i), file));
    held->release();
    for (auto& w : waiters) CHECK(w.wait() == 0);
    std::vector<std::string> expected;
    for (int i = 0; i < 16; ++i) expected.push_back(std::to_string(i));
    CHECK(lines_of(file) == expected);  // zero inversions
    CHECK(waiting(db, *raw, "queue") == 0);
}

TEST_CASE_TEMPLATE("a higher priority is served first and equal priorities stay in order", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    test::temp_dir dir;
    const auto file = dir.path / "order";
    auto holder = db.open();
    auto held = holder.try_acquire("prio");
    REQUIRE(held);
    std::vector<test::child> waiters;
    waiters.push_back(enqueue_worker(db, *raw, "prio", 0, 5000, "low-1", file));
    waiters.push_back(enqueue_worker(db, *raw, "prio", 0, 5000, "low-2", file));
    waiters.push_back(enqueue_worker(db, *raw, "prio", 5, 5000, "high-1", file));
    waiters.push_back(enqueue_worker(db, *raw, "prio", 0, 5000, "low-3", file));
    waiters.push_back(enqueue_worker(db, *raw, "prio", 5, 5000, "high-2", file));
    held->release();
    for (auto& w : waiters) CHECK(w.wait() == 0);
    CHECK(lines_of(file) == std::vector<std::string>{"high-1", "high-2", "low-1", "low-2", "low-3"});
}

TEST_CASE_TEMPLATE("a waiter killed with kill -9 is skipped once its row expires", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    test::temp_dir dir;
    const auto file = dir.path / "order";
    auto holder = db.open();
    auto held = holder.try_acquire("crash");
    REQUIRE(held);
    // The head waiter's row is a 1 s lease; the others' are long.
    auto head = enqueue_worker(db, *raw, "crash", 0, 1000, "dead", file);
    std::vector<test::child> rest;
    for (int i = 0; i < 4; ++i) rest.push_back(enqueue_worker(db, *raw, "crash", 0, 10000, std::to_string(i), file));
    head.signal(SIGKILL);
    CHECK(head.wait() == 128 + SIGKILL);
    held->release();
    for (auto& w : rest) CHECK(w.wait() == 0);
    CHECK(lines_of(file) == std::vector<std::string>{"0", "1", "2", "3"});
    // The dead waiter's row is left for the sweepers (any client's may have run).
    holder.sweep();
    CHECK(waiting(db, *raw, "crash") == 0);
}

TEST_CASE_TEMPLATE("an acquisition that is not fair does not pass a live fair waiter", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    test::temp_dir dir;
    auto holder = db.open();
    auto barger = db.open();
    auto held = holder.try_acquire("nobarge");
    REQUIRE(held);
    auto w = enqueue_worker(db, *raw, "nobarge", 0, 5000, "fair", dir.path / "order");
    held->release();
    // Until the fair waiter has had its turn, non-fair attempts lose.
    bool barged = false;
    while (waiting(db, *raw, "nobarge") > 0) {
        if (auto l = barger.try_acquire("nobarge")) {
            barged = waiting(db, *raw, "nobarge") > 0;
            l->release();
            break;
        }
    }
    CHECK_FALSE(barged);
    CHECK(w.wait() == 0);
    CHECK(lines_of(dir.path / "order") == std::vector<std::string>{"fair"});
}

TEST_CASE_TEMPLATE("a waiter that times out or is cancelled leaves no row behind", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    auto holder = db.open();
    auto waiter = db.open();
    auto held = holder.try_acquire("k");
    REQUIRE(held);
    CHECK_THROWS_AS((void)waiter.acquire("k", 300ms, {.fair = true}), sqlock::timeout_error);
    CHECK(waiting(db, *raw, "k") == 0);
    CHECK_THROWS_AS((void)waiter.acquire("k", 300ms), sqlock::timeout_error);  // not fair
    CHECK(waiting(db, *raw, "k") == 0);

    std::stop_source cancel;
    std::thread canceller([&] {
        REQUIRE(test::eventually([&] { return waiting(db, *raw, "k") == 1; }));
        cancel.request_stop();
    });
    CHECK_THROWS_AS((void)waiter.acquire("k", 30s, {.fair = true, .cancel = cancel.get_token()}), sqlock::cancelled_error);
    canceller.join();
    CHECK(waiting(db, *raw, "k") == 0);
    CHECK(waiter.stats().waits >= 2);
}

TEST_CASE_TEMPLATE("a thousand fair cycles with churn finish without a stall", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    test::temp_dir dir;
    std::vector<sqlock::client> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(db.open());
    std::atomic<int> granted{0}, timed_out{0};
    std::atomic<bool> inside{false}, overlap{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng(static_cast<unsigned>(t));
            auto& c = clients[static_cast<std::size_t>(t % 3)];
            while (granted.load() < 1000) {
                try {
                    // Some waits are too short to succeed: those waiters time out and leave.
                    // 2 ms, not 5: a handoff takes well under a millisecond now,
                    // so a 5 ms waiter behind four others could get the key
                    // every time (a CI run had no timeout in 1,000 cycles).
                    const auto patience = std::chrono::milliseconds(rng() % 4 == 0 ? 2 : 5000);
                    auto l = c.acquire("churn", patience,
                                       {.lease = 2s, .reentrant = false, .fair = true,
                                        .priority = static_cast<int>(rng() % 2)});
                    if (inside.exchange(true)) overlap = true;
                    inside = false;
                    ++granted;
                    l.release();
                } catch (const sqlock::timeout_error&) {
                    ++timed_out;
                }
            }
        });
    }
    // Meanwhile waiters in other processes join and die with kill -9, leaving
    // rows that stay in the queue until they expire (their lease: 500 ms).
    for (int i = 0; i < 4 && granted.load() < 1000; ++i) {
        test::child doomed({test::worker_path(), "fair", db.url(), db.prefix, "churn", "1", "500", "doomed",
                            (dir.path / "doomed").string()});
        std::this_thread::sleep_for(200ms);
        doomed.signal(SIGKILL);
        doomed.wait();
    }
    for (auto& th : threads) th.join();
    CHECK(granted.load() >= 1000);
    CHECK(timed_out.load() > 0);
    CHECK_FALSE(overlap.load());
    // Every live waiter left; only dead waiters' rows may remain, for the sweeper.
    std::this_thread::sleep_for(600ms);
    clients[0].sweep();
    CHECK(waiting(db, *raw, "churn") == 0);
}

// The holder releases once the waiter (not fair) has waited `waited`, and
// asks again at once, and again while the waiter wakes: every attempt must
// lose until the waiter has the key.
template <typename Db>
void releaser_yields(Db& db, std::chrono::milliseconds waited) {
    auto raw = db.raw();
    auto holder = db.open();
    auto waiter = db.open();
    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        auto held = holder.try_acquire("barge", {.lease = 60s});
        REQUIRE(held);
        std::optional<sqlock::lease> got;
        std::thread t([&] { got.emplace(waiter.acquire("barge", 30s)); });  // not fair
        // Polled every millisecond, so that the wait is `waited` and little more.
        const auto give_up = std::chrono::steady_clock::now() + 10s;
        while (waiting(db, *raw, "barge") != 1 && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(1ms);
        REQUIRE(waiting(db, *raw, "barge") == 1);
        std::this_thread::sleep_for(waited);
        held->release();
        int won = 0;
        while (waiting(db, *raw, "barge") > 0) {
            if (auto again = holder.try_acquire("barge", {.lease = 60s})) {
                won += waiting(db, *raw, "barge") > 0;
                again->release();
            }
        }
        t.join();
        CHECK(won == 0);
        REQUIRE(got);
        CHECK_FALSE(holder.try_acquire("barge"));  // the waiter holds it now
        got->release();
    }
}

TEST_CASE_TEMPLATE("a releaser does not re-win the key over a waiter that is not fair either", Db, ALL_BACKENDS) {
    // The old grant let the releaser's first attempt win, the waiter then
    // polling a whole lease away.
    Db db;
    releaser_yields(db, 50ms);
}

TEST_CASE_TEMPLATE("a releaser yields to a waiter that has waited only a few milliseconds", Db, ALL_BACKENDS) {
    // More than the 2 ms a newcomer may pass a waiter within (sql/*/grant.sql),
    // less than the 20 ms of schema versions 5 to 7, under which the releaser
    // re-won the key for the first 20 ms of every wait.
    Db db;
    releaser_yields(db, 5ms);
}

TEST_CASE_TEMPLATE("a release wakes the head waiter's client, not every waiting client", Db, ALL_BACKENDS) {
    Db db;
    auto raw = db.raw();
    auto holder = db.open();
    auto first = db.open();
    auto second = db.open();
    REQUIRE(holder.capabilities().wake_ups);
    // Every backend picks the head in the release's own transaction, and no
    // ring is lost (on MariaDB since schema version 13: the listener's
    // statement reads its ring count before it sleeps), so each round is
    // strict: the first's client rung once, the second's not at all.
    // Whatever the holder's mode: a select_for_update release rings the head
    // as its row lock ends.
    for (sqlock::mode m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        const std::string key = std::string("notify/") + sqlock::to_string(m);
        auto held = holder.try_acquire(key, {.mode = m, .lease = 60s});
        REQUIRE(held);
        std::optional<sqlock::lease> got_first;
        std::thread t1([&] { got_first.emplace(first.acquire(key, 30s, {.fair = true})); });
        REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == 1; }));
        std::thread t2([&] { (void)second.acquire(key, 30s, {.fair = true}); });
        REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == 2; }));
        REQUIRE(test::eventually([&] { return listening(db, *raw, 2); }));
        CHECK(test::eventually([&] { return bells_held(db, *raw, 2) == 2; }));
        std::this_thread::sleep_for(300ms);  // both are asleep now (the lease has 60 s left)
        const auto first_wakeups = first.stats().wakeups;
        const auto second_wakeups = second.stats().wakeups;
        held->release();
        t1.join();
        // The release also wakes this process's waiters directly, so the
        // first may be granted before the doorbell reaches its client's
        // listener.
        if (m == sqlock::mode::select_for_update && db.name() == "mysql") {
            // On MariaDB a waiter's attempt waits in the server for a
            // select_for_update holder's row (up to the 1 s lock wait): one
            // in flight as the row lock ends is granted at once, leaves the
            // queue, and the release then rings the next head, the second.
            // Still one ring, and only then the second's (a CI run under
            // ASan, 2026-11-27).
            CHECK(test::eventually([&] {
                return first.stats().wakeups + second.stats().wakeups == first_wakeups + second_wakeups + 1;
            }));
            if (second.stats().wakeups != second_wakeups) CHECK(first.stats().wakeups == first_wakeups);
        } else {
            CHECK(test::eventually([&] { return first.stats().wakeups == first_wakeups + 1; }));  // the release's ring
            CHECK(second.stats().wakeups == second_wakeups);  // not the second's client
        }
        const auto first_after = first.stats().wakeups;
        const auto second_after = second.stats().wakeups;
        REQUIRE(test::eventually([&] { return listening(db, *raw, 2); }));
        got_first->release();  // now the second is at the head: its client gets the doorbell
        t2.join();
        // The next release's ring, at the next head.
        CHECK(test::eventually([&] { return second.stats().wakeups == second_after + 1; }));
        CHECK(first.stats().wakeups == first_after);  // not the first's client again
    }
}

TEST_CASE_TEMPLATE("sixteen threads of one client on one key: a release wakes one of them, not all", Db,
                   ALL_BACKENDS) {
    // Every thread holds the key briefly, then asks again at once. Before
    // local wake-ups were per key, every release woke all fifteen waiting
    // threads and each tried: 23.8 statements an acquisition on PostgreSQL,
    // 31 on MariaDB, 77.5 on SQLite (docs/benchmarks.md). Now only the
    // thread at the head of the local queue tries; the others poll at the
    // slowest rate, and a thread that queues behind another does not try
    // again before it sleeps. Per acquisition that leaves: its grant, its
    // release, and the releaser's next ask (a miss, its ticket).
    Db db;
    auto c = db.open_quiet();
    constexpr int threads = 16;
    constexpr int rounds = 12;
    const std::string key = "herd";
    // The unit: what one acquisition that waited costs when it is the only
    // waiter (its miss, its ticket, its queued miss, its grant, its
    // release; behind PgBouncer each with its transaction's settings).
    auto raw = db.raw();
    auto holder = db.open_quiet();
    {
        auto warm = c.try_acquire(key + "/warm");  // the client's first statement also checks the schema
        REQUIRE(warm);
    }
    auto held = holder.try_acquire(key);
    REQUIRE(held);
    const auto alone = c.stats().statements;
    std::thread lone([&] { c.acquire(key, 30s).release(); });
    REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == 1; }));
    held->release();
    lone.join();
    const auto unit = static_cast<double>(c.stats().statements - alone);
    std::atomic<int> inside{0};
    std::atomic<bool> overlapped{false};
    std::atomic<int> started{0};
    const auto before = c.stats();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&] {
            ++started;
            while (started.load() < threads) std::this_thread::yield();
            for (int i = 0; i < rounds; ++i) {
                auto l = c.acquire(key, 60s);
                if (inside.fetch_add(1) != 0) overlapped = true;
                std::this_thread::sleep_for(1ms);
                inside.fetch_sub(1);
                l.release();
            }
        });
    for (auto& w : workers) w.join();
    const auto after = c.stats();
    const double acquisitions = threads * rounds;
    const double statements = static_cast<double>(after.statements - before.statements) / acquisitions;
    const double misses = static_cast<double>(after.contention_misses - before.contention_misses) / acquisitions;
    MESSAGE(db.name() << ": " << statements << " statements and " << misses << " misses an acquisition; "
                      << unit << " for one that waited alone");
    CHECK_FALSE(overlapped.load());
    CHECK(misses < 3);  // 1 expected; every thread woken at every release made it 15
    // Under one unit (PostgreSQL 4, MariaDB 4.4, SQLite 8, whose queued
    // grant comes with BEGIN and COMMIT); waking every thread made it 5 to 6
    // units.
    CHECK(statements < 2 * unit);
}

TEST_CASE_TEMPLATE("a release wakes this process's waiters one at a time, highest priority first", Db,
                   ALL_BACKENDS) {
    // The local queue is kept in the waiter table's order, so the waiter a
    // release wakes is the one the grant lets in: none is woken for
    // nothing. A wrong local order would wake a waiter whose grant fails, and
    // the right one would wait for its next poll.
    Db db;
    auto holder = db.open();
    auto c = db.open_quiet();
    auto raw = db.raw();
    const std::string key = "local-order";
    auto held = holder.try_acquire(key, {.lease = 60s});
    REQUIRE(held);
    const std::vector<int> priorities = {0, 0, 5, 0, 5, 0, 9, 0};
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> waiters;
    for (std::size_t i = 0; i < priorities.size(); ++i) {
        waiters.emplace_back([&, i] {
            auto l = c.acquire(key, 30s, {.fair = true, .priority = priorities[i]});
            std::lock_guard g(mu);
            order.push_back(static_cast<int>(i));
        });
        REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == static_cast<std::int64_t>(i) + 1; }));
    }
    REQUIRE(test::eventually([&] { return listening(db, *raw, 1); }));
    std::this_thread::sleep_for(100ms);  // every waiter asleep, the head on its backoff, the rest at the slowest poll
    const auto misses = c.stats().contention_misses;
    held->release();
    for (auto& w : waiters) w.join();
    CHECK(order == std::vector<int>{6, 2, 4, 0, 1, 3, 5, 7});
    // Each grant's release woke the next head at once; the others' slowest
    // poll (1 s) seldom falls in the few milliseconds this takes (a
    // fresh-clone CI run on a loaded machine saw 3). Waking every waiter at
    // each release made it 28 misses.
    CHECK(c.stats().contention_misses - misses <= 4);
}

TEST_CASE_TEMPLATE("a lock's release rings the lock's waiter, not a semaphore's of the same name", Db,
                   ALL_BACKENDS) {
    // Permit waiters share the waiters table with the lock's. Before schema
    // version 12 a lock release looked for the head among both, so a permit
    // waiter queued first took the ring (and the lock's grant counted it
    // ahead of the lock's waiter, which was then not granted at all).
    Db db;
    auto raw = db.raw();
    auto holder = db.open();
    auto permit_waiter = db.open();
    auto lock_waiter = db.open();
    REQUIRE(holder.capabilities().wake_ups);
    const std::string key = "notify-kind";
    auto held = holder.try_acquire(key, {.lease = 60s});
    auto permit = holder.try_acquire_permit(key, 1, {.lease = 60s});
    REQUIRE(held);
    REQUIRE(permit);
    std::optional<sqlock::lease> got_permit;
    std::thread p([&] { got_permit.emplace(permit_waiter.acquire_permit(key, 1, 60s, {.fair = true})); });
    REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == 1; }));
    std::optional<sqlock::lease> got;
    std::thread l([&] { got.emplace(lock_waiter.acquire(key, 30s, {.fair = true})); });
    REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == 2; }));
    REQUIRE(test::eventually([&] { return listening(db, *raw, 2); }));
    std::this_thread::sleep_for(300ms);  // both are asleep now
    REQUIRE(waiting(db, *raw, key) == 2);  // the permit waiter is still queued, ahead of the lock's
    const auto permit_wakeups = permit_waiter.stats().wakeups;
    const auto lock_wakeups = lock_waiter.stats().wakeups;
    held->release();
    l.join();
    REQUIRE(got);  // the lock's waiter is granted, with a permit waiter queued before it
    CHECK(test::eventually([&] { return lock_waiter.stats().wakeups == lock_wakeups + 1; }));
    CHECK(permit_waiter.stats().wakeups == permit_wakeups);  // the permit is still held: no ring for it
    permit->release();  // now the permit waiter's turn
    p.join();
    CHECK(got_permit);
}

TEST_CASE_TEMPLATE("a ring that comes while the listener is not waiting is kept for its next wait", Db,
                   ALL_BACKENDS) {
    // A listener does more than wait: between two waits it passes a ring on,
    // or reconnects. A release that rings it then must not be lost: its next
    // wait returns at once, however slow the machine: the ring is in before
    // it. Until schema version 13 MariaDB lost it (a KILL QUERY of an idle
    // connection does nothing), and the waiter slept until its next poll, up
    // to a second; here its next wait would run the full 2 s and return
    // false. Every release that rings: a lease's, a reader's,
    // a permit's and, where there are row locks, a select_for_update
    // holder's. The listener is the dialect's own, so the test decides when
    // it waits.
    Db db;
    const test::migrated_dialect dialect(db);
    REQUIRE(dialect->capabilities().wake_ups);
    const std::string channel = db.prefix + "w_" + test::random_hex(16);
    auto listener = dialect->listen(channel);
    auto session = dialect->connect();
    auto other = dialect->connect();  // queues while `session` may be inside a row lock's transaction
    auto queue = [&](const std::string& key, char kind) {
        const auto ticket = other->enqueue({.key = key, .kind = kind, .owner = "waiter", .fair = true,
                                            .priority = 0, .lease_ms = 60'000, .listener = channel,
                                            .holder = "test"});
        REQUIRE(ticket > 0);
        return ticket;
    };
    auto holder = [&](char kind, const std::string& key) {
        return sqlock::detail::holder_request{.kind = kind, .key = key, .owner = "holder", .permits = 1,
                                              .lease_ms = 60'000, .holder = "test", .note = ""};
    };
    using sqlock::detail::heard;
    CHECK(listener->wait(10ms) == heard::nothing);  // nothing rung yet; from here on it is not waiting
    auto rung_once = [&] {
        CHECK(listener->wait(2s) == heard::ring);       // the ring that came while it was not waiting
        CHECK(listener->wait(10ms) == heard::nothing);  // and only once
    };
    SUBCASE("a lease's release") {
        REQUIRE(session->grant({.key = "ring/lease", .owner = "holder", .mode = sqlock::mode::conditional_update,
                                .lease_ms = 60'000, .holder = "test", .note = "", .want_remaining = false})
                    .token);
        // A client's waiter tries once with its ticket right after it
        // queues; that try, finding the key held, is what makes a key that
        // nobody waited for ring its queue at the release (on MariaDB it
        // clears the key's lean flag: migrations/mysql/0014_lean_grants.sql).
        const auto ticket = queue("ring/lease", 'X');
        CHECK_FALSE(other->grant({.key = "ring/lease", .owner = "waiter", .mode = sqlock::mode::conditional_update,
                                  .lease_ms = 60'000, .holder = "test", .note = "", .want_remaining = false,
                                  .ticket = ticket, .priority = 0})
                        .token);
        REQUIRE(session->release("ring/lease", "holder", sqlock::mode::conditional_update));
        rung_once();
    }
    SUBCASE("the last reader's release") {
        REQUIRE(session->grant_holder(holder('S', "ring/shared")).token);
        queue("ring/shared", 'X');
        REQUIRE(session->release_holder('S', "ring/shared", "holder"));
        rung_once();
    }
    SUBCASE("a permit's release") {
        REQUIRE(session->grant_holder(holder('P', "ring/permit")).token);
        queue("ring/permit", 'P');
        REQUIRE(session->release_holder('P', "ring/permit", "holder"));
        rung_once();
    }
    SUBCASE("a select_for_update holder's release") {
        auto* rows = session->row_locks();
        if (!rows) return;  // SQLite has no row locks
        rows->ensure_row("ring/row");
        REQUIRE(rows->lock_row("ring/row", 60'000, sqlock::detail::no_ticket, sqlock::detail::not_fair).state ==
                sqlock::detail::row_lock_ops::state::locked);
        queue("ring/row", 'X');
        rows->release_row_lock("ring/row");
        rung_once();
    }
}

TEST_CASE_TEMPLATE("a ring that interrupts the listener's sleep wakes at once, and a stray interrupt rings nothing",
                   Db, test::mysql_db) {
    // MariaDB's listener sleeps in a statement that a release's KILL QUERY
    // ends. The interrupt is a hint (wake the waiters now, before the count
    // is read: one round trip less in every handoff between processes); the
    // next wait reads the count and confirms the ring at once, counted once.
    // A KILL that comes with no ring behind it (a late one, for a count
    // already seen) is a hint too, and the next wait then finds nothing new
    // and sleeps its whole timeout: no ring is made up.
    Db db;
    const test::migrated_dialect dialect(db);
    const std::string channel = db.prefix + "w_" + test::random_hex(16);
    auto listener = dialect->listen(channel);
    auto session = dialect->connect();
    auto raw = db.raw();
    using sqlock::detail::heard;
    REQUIRE(listener->wait(10ms) == heard::nothing);
    // Waits on another thread while `act` runs once the listener's statement
    // is asleep in the server (it shows in the process list).
    auto wait_during = [&](const std::function<void()>& act) {
        auto waited = std::async(std::launch::async, [&] { return listener->wait(5s); });
        REQUIRE(test::eventually([&] {
            return asleep(*raw, channel);
        }));
        const auto at = std::chrono::steady_clock::now();
        act();
        const heard h = waited.get();
        CHECK(std::chrono::steady_clock::now() - at < 4s);  // interrupted, not the timeout
        return h;
    };
    SUBCASE("a release's ring") {
        auto other = dialect->connect();
        held_and_queued(*session, *other, "hint/lease", channel);
        CHECK(wait_during([&] { REQUIRE(session->release("hint/lease", "holder", sqlock::mode::conditional_update)); }) ==
              heard::hint);
        CHECK(listener->wait(2s) == heard::ring);       // the count, read at once
        CHECK(listener->wait(10ms) == heard::nothing);  // and only once
    }
    SUBCASE("a stray interrupt") {
        CHECK(wait_during([&] {
                  raw->exec("KILL QUERY " + std::to_string(raw->scalar("SELECT IS_USED_LOCK('" + channel + "')")));
              }) == heard::hint);
        const auto at = std::chrono::steady_clock::now();
        CHECK(listener->wait(300ms) == heard::nothing);
        CHECK(std::chrono::steady_clock::now() - at >= 300ms);  // it slept: the count had not moved
    }
}

TEST_CASE_TEMPLATE("releases that ring one listener together interrupt its sleep once", Db, test::mysql_db) {
    // A client waiting for several keys that are freed together is rung by
    // each of their releases. Each used to send its KILL QUERY, and MariaDB
    // 10.11 stalls when a KILL finds its target woken by an earlier one but
    // not yet out of its SLEEP: the release took 2 s, and every SLEEP() on
    // the server with it (8 releases ringing one listener at once, 60 rounds:
    // 4-6 such releases a run). Since schema version 16 a release interrupts
    // the listener only if it sleeps at the count that release moved past:
    // the first of these releases, and none of the others until the listener
    // has taken its ring. Counted by the server's Com_kill, which every
    // connection's KILLs move: a round in which another test killed something
    // too is run again; with a KILL per release no round can show one.
    Db db;
    const test::migrated_dialect dialect(db);
    const std::string channel = db.prefix + "w_" + test::random_hex(16);
    auto listener = dialect->listen(channel);
    auto session = dialect->connect();
    auto other = dialect->connect();
    auto raw = db.raw();
    using sqlock::detail::heard;
    REQUIRE(listener->wait(10ms) == heard::nothing);
    auto kills = [&] {
        return raw->scalar("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'COM_KILL'");
    };
    constexpr int keys = 4;
    bool once = false;
    for (int round = 0; round < 5 && !once; ++round) {
        for (int k = 0; k < keys; ++k) {
            const std::string key = "together/" + std::to_string(round) + "/" + std::to_string(k);
            held_and_queued(*session, *other, key, channel);
        }
        auto waited = std::async(std::launch::async, [&] { return listener->wait(5s); });
        REQUIRE(test::eventually([&] {
            return asleep(*raw, channel);
        }));
        const auto before = kills();
        for (int k = 0; k < keys; ++k)
            REQUIRE(session->release("together/" + std::to_string(round) + "/" + std::to_string(k), "holder",
                                     sqlock::mode::conditional_update));
        const auto sent = kills() - before;
        MESSAGE("round " << round << ": " << sent << " KILLs for " << keys << " rings");
        CHECK(waited.get() == heard::hint);             // interrupted
        CHECK(listener->wait(2s) == heard::ring);       // every ring's count, read at once
        CHECK(listener->wait(10ms) == heard::nothing);  // and nothing left over
        CHECK(sent >= 1);
        once = sent == 1;
    }
    CHECK(once);
}

TEST_CASE_TEMPLATE("a MariaDB listener keeps its connection when statement_timeout is shorter than its sleep", Db,
                   test::mysql_db) {
    // The listener sleeps 250 ms at a time. It took the client's
    // statement_timeout as max_statement_time, so at 200 ms every sleep
    // failed (1969) and the listener reconnected every 0.75 s, its waiters
    // polling meanwhile. Its connection is sampled for 2 s: one throughout.
    Db db;
    auto o = db.options();
    o.statement_timeout = 200ms;
    auto c = sqlock::client::open(db.url(), o);
    c.migrate();
    auto holder = db.open();
    auto held = holder.try_acquire("short/listener", {.lease = 60s});
    REQUIRE(held);
    std::thread waiter([&] { (void)c.acquire("short/listener", 30s); });
    auto raw = db.raw();
    REQUIRE(test::eventually([&] { return listening(db, *raw, 1); }));
    std::set<std::int64_t> connections;
    for (int i = 0; i < 40; ++i) {
        const auto id = raw->scalar("SELECT COALESCE(MAX(ID), 0) FROM information_schema.PROCESSLIST WHERE INFO LIKE "
                                    "'SELECT SLEEP(%" + db.prefix + "w%'");
        if (id != 0) connections.insert(id);
        std::this_thread::sleep_for(50ms);
    }
    CHECK(connections.size() == 1);
    held->release();
    waiter.join();
}

TEST_CASE_TEMPLATE("a listener of a library older than schema version 16 is interrupted at every ring", Db,
                   test::mysql_db) {
    // Such a listener holds its channel's name and sleeps, but arms at no
    // count (nor holds the name of count -1 that tells a release it would):
    // every ring interrupts it, as before version 16. Played here by a plain
    // connection doing what that library's listener did.
    Db db;
    const test::migrated_dialect dialect(db);
    auto session = dialect->connect();
    auto other = dialect->connect();
    auto old = db.raw();
    auto raw = db.raw();
    const std::string channel = db.prefix + "w_" + test::random_hex(16);
    REQUIRE(old->scalar("SELECT GET_LOCK('" + channel + "', 0)") == 1);
    old->exec("INSERT INTO " + db.table("rings") + " (channel, rung, touched_at) VALUES ('" + channel +
              "', 0, UTC_TIMESTAMP(6))");
    for (int round = 0; round < 2; ++round) {
        const std::string key = "old-listener/" + std::to_string(round);
        const auto ticket = held_and_queued(*session, *other, key, channel);
        // Its sleep, the same count each round: it never re-arms.
        // Interrupted: SLEEP answers 1, or the statement fails with error
        // 1317 (interrupted) when the KILL lands before the SLEEP starts.
        auto slept = std::async(std::launch::async, [&]() -> std::int64_t {
            try {
                return old->scalar("SELECT SLEEP(30), '" + channel + "'");
            } catch (const std::exception& e) {
                return std::string_view(e.what()).find("interrupted") != std::string_view::npos ? 1 : 0;
            }
        });
        REQUIRE(test::eventually([&] {
            return asleep(*raw, channel);
        }));
        REQUIRE(session->release(key, "holder", sqlock::mode::conditional_update));
        CHECK(slept.get() == 1);
        other->dequeue(ticket);
    }
}

TEST_CASE_TEMPLATE("a waiter in another process is granted at the ring of the release, in every mode", Db,
                   SERVER_BACKENDS) {
    // The attempt a ring starts must find the key free. A lease's release
    // rings after its COMMIT (MariaDB: the KILL QUERY after the commit of the
    // ring's count; PostgreSQL: the NOTIFY goes out at the commit); a
    // select_for_update release rings as its row lock ends: on MariaDB one
    // CALL rolls back, counts the ring and rings, on PostgreSQL the NOTIFY is
    // delivered with the commit. A ring sent while the key is still held
    // sends the waiter's attempt into a miss and then its backoff (up to a
    // second). In one process the release also wakes the local waiters
    // directly, which hides that order; here the waiter is a process of its
    // own, which only the doorbell can wake before its next poll. A poll of
    // its own between the note and the release would also count as a miss
    // (its backoff is 128 ms or more by then, the window a few ms): such a
    // round is run again, up to 3 times. A ring that comes a millisecond or
    // more before the key is free misses in every round: checked with a
    // 20 ms pause put between MariaDB's ring and its ROLLBACK
    // (select_for_update) and with the ring and a 50 ms pause put before a
    // lease release's UPDATE of the lock row (2026-11-27); one only
    // microseconds ahead is not caught, because the attempt it starts takes
    // longer than that to arrive. A ring between that UPDATE and the COMMIT
    // passes, even with 50 ms between them: the attempt's UPDATE of the lock
    // row, a search by primary key, waits for the release's row lock
    // (docs/backends.md, "Wake-ups: a doorbell", has why MariaDB does not
    // ring there).
    Db db;
    auto raw = db.raw();
    auto holder = db.open();
    REQUIRE(holder.capabilities().wake_ups);
    for (sqlock::mode m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        bool clean = false;
        for (int round = 0; round < 3 && !clean; ++round) {
            const std::string key = std::string("ring/") + sqlock::to_string(m) + "/" + std::to_string(round);
            auto held = holder.try_acquire(key, {.mode = m, .lease = 60s});
            REQUIRE(held);
            test::child waiter({test::worker_path(), "ring-wait", db.url(), db.prefix, key, sqlock::to_string(m)});
            REQUIRE(test::eventually([&] { return waiting(db, *raw, key) == 1; }));
            REQUIRE(test::eventually([&] { return listening(db, *raw, 1); }));
            CHECK(test::eventually([&] { return bells_held(db, *raw, 1) == 1; }));
            std::this_thread::sleep_for(300ms);  // asleep in its backoff
            waiter.signal(SIGUSR1);
            REQUIRE(waiter.read_line() == std::optional<std::string>("noted"));
            held->release();
            const auto misses = waiter.read_line();
            const auto wakeups = waiter.read_line();
            REQUIRE(waiter.wait() == 0);
            REQUIRE(misses);
            REQUIRE(wakeups);
            MESSAGE(std::string(sqlock::to_string(m)) << " round " << round << ": " << *misses << ", " << *wakeups);
            clean = *misses == "misses 0" && *wakeups == "wakeups 1";
        }
        CHECK(clean);
    }
}

}  // TEST_SUITE

TEST_SUITE("fair") {

TEST_CASE_TEMPLATE("the wake-up listener is rebuilt after its connection is killed", Db, SERVER_BACKENDS) {
    Db db;
    auto raw = db.raw();
    auto holder = db.open();
    auto waiter = db.open();
    // Handoffs until one is signalled by a wake-up at the waiter's listener.
    // One alone may not be: a wake-up is a hint, and the waiter's own retry
    // can take the key (and its queue row, which names the listener) between
    // the release's commit and its wake-up; a few in a row all are unless the
    // listener is gone.
    auto handoff = [&] {
        for (int attempt = 0; attempt < 5; ++attempt) {
            auto held = holder.try_acquire("relisten", {.lease = 60s});
            REQUIRE(held);
            std::thread t([&] { (void)waiter.acquire("relisten", 30s, {.fair = true}); });
            REQUIRE(test::eventually([&] { return waiting(db, *raw, "relisten") == 1; }));
            REQUIRE(test::eventually([&] { return listening(db, *raw, 1); }));
            const auto before = waiter.stats().wakeups;
            held->release();
            t.join();
            if (test::eventually([&] { return waiter.stats().wakeups > before; }, 2s)) return true;
        }
        return false;
    };
    REQUIRE(handoff());
    // Kill the listening connection: the LISTEN (PostgreSQL) or the SLEEP
    // (MariaDB) naming this prefix's channel.
    if (db.name() == "postgres") {
        REQUIRE(raw->scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND query LIKE 'LISTEN%" + db.prefix + "w%'") == 1);
    } else {
        std::int64_t id = 0;
        REQUIRE(test::eventually([&] {
            id = raw->scalar("SELECT COALESCE(MIN(ID), 0) FROM information_schema.PROCESSLIST "
                             "WHERE INFO LIKE 'SELECT SLEEP(%" + db.prefix + "w%'");
            return id != 0;
        }));
        raw->exec("KILL " + std::to_string(id));
    }
    std::this_thread::sleep_for(800ms);  // the listener notices and reconnects
    CHECK(handoff());
}

}  // TEST_SUITE
