// Reader-writer locks and counting semaphores, on every backend: the
// contract in one process, and exclusion / the N-bound across processes
// (tests/worker.cpp "rw", "sem", "hold-permit").

#include "dialects/common/fault.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <fstream>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <stop_token>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

// Replays an event log of "<TAG>+ pid" / "<TAG>- pid" lines (in the order
// the processes wrote them) and keeps the most holders inside at once.
struct replay {
    int max_readers = 0, max_writers = 0, max_permits = 0;
    int readers_with_writer = 0;  // lines after which a writer and a reader were both inside
    int lines = 0, unbalanced = 0;
};

replay replay_log(const std::string& path) {
    replay out;
    std::ifstream in(path);
    std::string line;
    int readers = 0, writers = 0, permits = 0;
    while (std::getline(in, line)) {
        ++out.lines;
        const std::string tag = line.substr(0, 2);
        if (tag == "R+") ++readers;
        else if (tag == "R-") --readers;
        else if (tag == "W+") ++writers;
        else if (tag == "W-") --writers;
        else if (tag == "P+") ++permits;
        else if (tag == "P-") --permits;
        if (readers < 0 || writers < 0 || permits < 0) ++out.unbalanced;
        out.max_readers = std::max(out.max_readers, readers);
        out.max_writers = std::max(out.max_writers, writers);
        out.max_permits = std::max(out.max_permits, permits);
        if (writers > 0 && readers > 0) ++out.readers_with_writer;
    }
    if (readers != 0 || writers != 0 || permits != 0) ++out.unbalanced;
    return out;
}

std::vector<test::child> spawn(int n, const std::vector<std::string>& args) {
    std::vector<test::child> out;
    for (int i = 0; i < n; ++i) {
        std::vector<std::string> argv{test::worker_path()};
        argv.insert(argv.end(), args.begin(), args.end());
        out.emplace_back(argv);
    }
    return out;
}

void finish(std::vector<test::child>& children, int iterations) {
    for (auto& c : children) {
        CHECK(test::line_or_eof(c.read_line(240s)) == "done " + std::to_string(iterations));
        CHECK(c.wait() == 0);
    }
}

}  // namespace

TEST_SUITE("primitives") {

// A caller's renew() of a reader whose key row a peer's grant or release
// has locked for a moment waits for it, as every other renewal does. On
// PostgreSQL the batched renewal skips a locked row (the watchdog comes back
// later), and renew() threw at once that the row stayed locked "past the row
// lock timeout".
TEST_CASE_TEMPLATE("renew() of a reader waits for a key row a peer locked for a moment", Db, SERVER_BACKENDS) {
    Db db;
    auto o = db.options();
    o.row_lock_timeout = 3s;
    auto c = sqlock::client::open(db.url(), o);
    const std::string key = "prim/renew-locked";
    auto reader = c.try_acquire_shared(key, {.lease = 30s, .auto_renew = false});
    REQUIRE(reader);
    auto raw = db.raw();
    raw->begin();
    raw->scalar("SELECT 1 FROM " + db.table("locks") + " WHERE lock_key = '" + key + "' FOR UPDATE");
    std::thread unlock([&] {
        std::this_thread::sleep_for(300ms);
        raw->commit();
    });
    bool renewed = false;
    std::string failed;
    try {
        renewed = reader->renew();
    } catch (const std::exception& e) {
        failed = e.what();
    }
    unlock.join();
    CAPTURE(failed);
    CHECK(failed.empty());
    CHECK(renewed);
    CHECK_FALSE(reader->lost());
}

TEST_CASE_TEMPLATE("shared holders coexist and exclude an exclusive holder", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto r1 = a.try_acquire_shared("rw/key");
    REQUIRE(r1);
    CHECK(r1->kind() == sqlock::lease_kind::shared);
    auto r2 = b.try_acquire_shared("rw/key");
    REQUIRE(r2);
    CHECK(r1->owner() != r2->owner());
    CHECK(r1->token() == r2->token());  // one group of readers, one token
    for (auto m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        CHECK_FALSE(b.try_acquire("rw/key", {.mode = m}));
    }
    CHECK(a.holders("rw/").size() == 2);
    r1->release();
    CHECK_FALSE(b.try_acquire("rw/key"));  // r2 still reads
    r2->release();
    auto w = b.try_acquire("rw/key");
    REQUIRE(w);
    CHECK(w->token() > r2->token());
    CHECK_FALSE(a.try_acquire_shared("rw/key"));
    w->release();
    auto r3 = a.try_acquire_shared("rw/key");
    REQUIRE(r3);
    CHECK(r3->token() > w->token());  // a new group of readers draws a token of its own
    CHECK(a.holders("rw/").size() == 1);
}

TEST_CASE_TEMPLATE("a select_for_update holder and shared holders exclude each other", Db, SERVER_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto r = a.try_acquire_shared("rw/sfu");
    REQUIRE(r);
    CHECK_FALSE(b.try_acquire("rw/sfu", {.mode = sqlock::mode::select_for_update}));
    r->release();
    auto w = b.try_acquire("rw/sfu", {.mode = sqlock::mode::select_for_update});
    REQUIRE(w);
    CHECK_FALSE(a.try_acquire_shared("rw/sfu"));
}

TEST_CASE_TEMPLATE("a waiting writer holds off new readers", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto reader = a.try_acquire_shared("rw/queue");
    REQUIRE(reader);
    std::atomic<bool> granted{false};
    std::thread writer([&] {
        auto w = b.acquire("rw/queue", 30s);
        granted = true;
        w.release();
    });
    // The writer queues once it finds the key busy.
    for (int i = 0; i < 500 && a.waiters("rw/queue").empty(); ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(a.waiters("rw/queue").size() == 1);
    CHECK_FALSE(a.try_acquire_shared("rw/queue"));  // a new reader yields to the waiting writer
    reader->release();
    writer.join();
    CHECK(granted);
    CHECK(a.try_acquire_shared("rw/queue"));
}

TEST_CASE_TEMPLATE("a shared lease is renewed, and its loss is reported before a writer is granted", Db,
                   ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto renewed = a.try_acquire_shared("rw/renewed", {.lease = 600ms});
    REQUIRE(renewed);
    std::this_thread::sleep_for(1500ms);  // more than two leases: only renewals keep it
    CHECK_FALSE(renewed->lost());
    CHECK_FALSE(b.try_acquire("rw/renewed"));
    renewed->release();

    std::atomic<int> lost_calls{0};
    auto fixed = a.try_acquire_shared(
        "rw/fixed", {.lease = 800ms, .auto_renew = false, .on_lost = [&](const std::string&, std::int64_t) {
                         ++lost_calls;
                     }});
    REQUIRE(fixed);
    auto w = b.acquire("rw/fixed", 10s);
    CHECK(fixed->lost());  // said before the writer got it
    CHECK(w.token() > fixed->token());
    CHECK_THROWS_AS(fixed->check(), sqlock::lease_lost_error);
    CHECK(fixed->stop_token().stop_requested());
    for (int i = 0; i < 200 && lost_calls == 0; ++i) std::this_thread::sleep_for(10ms);
    CHECK(lost_calls == 1);
}

TEST_CASE_TEMPLATE("force_release ends a group of readers: their renewals fail and a writer gets the key", Db,
                   ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto breaker = db.open();
    auto reader = a.try_acquire_shared("rw/forced", {.lease = 600ms});
    REQUIRE(reader);
    CHECK(breaker.force_release("rw/forced", "test") > reader->token());
    // The reader's renewal (every 200 ms) must now fail. It used to renew the
    // reader's own row, still live, and raise the key's row with it: the
    // group lived on, renewed, and no writer got the key.
    CHECK(test::eventually([&] { return reader->lost(); }, 3s));
    std::this_thread::sleep_for(700ms);  // more than a lease: a renewal that revived the group shows by now
    CHECK(b.try_acquire("rw/forced"));
}

// SQLite: the readers' renewal raised the key's row to the latest expiry of
// its readers' rows, expired or not, with max(), which is NULL when there is
// no row: once a sweeper had deleted the rows of a group force_release had
// ended, the renewal that found the group gone left the key's row owned by
// 'shared' with no expiry, and no writer was ever granted the key again (one
// run of the test above in about 200, when a client's sweep fell in the
// 200 ms before the renewal).
TEST_CASE_TEMPLATE("a writer gets the key after a forced release whose readers' rows were swept before their renewal",
                   Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto breaker = db.open();
    auto reader = a.try_acquire_shared("rw/swept", {.lease = 3s});  // renewed about a second in
    REQUIRE(reader);
    CHECK(breaker.force_release("rw/swept", "test") > reader->token());
    CHECK(breaker.sweep() >= 1);  // the reader's row, expired by the forced release
    CHECK(test::eventually([&] { return reader->lost(); }, 5s));
    // No row is left owned without an expiry (which the grants now also
    // take, so the writer's grant alone would not show it).
    const std::string expires = db.name() == "sqlite" ? "expires_ms" : "expires_at";
    CHECK(test::raw_connection_for(db.url())
              ->scalar("SELECT count(*) FROM " + db.prefix + "locks WHERE owner IS NOT NULL AND " + expires +
                       " IS NULL") == 0);
    auto w = b.try_acquire("rw/swept");
    REQUIRE(w);
    CHECK(w->token() > reader->token());
    auto info = breaker.inspect("rw/swept");
    CHECK(info.held);
    CHECK(info.owner == w->owner());
}

// PostgreSQL: a reader or permit waiter of a client behind a transaction
// pool (no LISTEN) was queued with an empty channel rather than none, and the
// release that found it at the head of the queue failed in pg_notify('') and
// rolled back: the key, or the permit, stayed held for the rest of its lease.
TEST_CASE_TEMPLATE("a release with a pooled client's reader or permit waiter at the head of the queue succeeds",
                   Db, test::postgres_db) {
    Db db;
    const std::string pooled_url =
        db.url() + (db.url().find('?') == std::string::npos ? "?" : "&") + "sqlock_pool_mode=transaction";
    auto holder = db.open();
    auto pooled = sqlock::client::open(pooled_url, db.options());
    for (const bool permit : {false, true}) {
        CAPTURE(permit);
        const std::string key = permit ? "sem/pooled" : "rw/pooled";
        auto held = permit ? holder.try_acquire_permit(key, 1) : holder.try_acquire(key);
        REQUIRE(held);
        std::optional<sqlock::lease> got;
        std::string failed;
        std::thread waiter([&] {
            try {
                got.emplace(permit ? pooled.acquire_permit(key, 1, 20s) : pooled.acquire_shared(key, 20s));
            } catch (const std::exception& e) {
                failed = e.what();
            }
        });
        CHECK(test::eventually([&] { return !holder.waiters(key).empty(); }, 10s));
        CHECK_NOTHROW(held->release());
        waiter.join();
        CHECK(failed.empty());
        REQUIRE(got);
        CHECK(got->token() > held->token());
        got->release();
    }
}

// PostgreSQL: a library before schema 15 stored '' (not NULL) as the channel
// of a pooled client's reader or permit waiter. Such rows may be in a shared
// table while the fleet upgrades: every release that rings must pass them.
TEST_CASE_TEMPLATE("a release passes a waiter row an older library left with an empty channel", Db,
                   test::postgres_db) {
    Db db;
    auto holder = db.open();
    auto raw = db.raw();
    auto queue_old_waiter = [&](const std::string& key, char kind) {
        raw->exec("INSERT INTO " + db.table("waiters") +
                  " (lock_key, owner, fair, priority, expires_at, listener, holder, kind) VALUES ('" + key +
                  "', 'older', false, 0, clock_timestamp() + interval '60 s', '', 'older', '" + std::string(1, kind) +
                  "')");
    };
    SUBCASE("a lease's release") {
        auto held = holder.try_acquire("old/lease");
        REQUIRE(held);
        queue_old_waiter("old/lease", 'S');
        CHECK_NOTHROW(held->release());
    }
    SUBCASE("the last reader's release") {
        auto held = holder.try_acquire_shared("old/shared");
        REQUIRE(held);
        queue_old_waiter("old/shared", 'X');
        CHECK_NOTHROW(held->release());
    }
    SUBCASE("a permit's release") {
        auto held = holder.try_acquire_permit("old/permit", 1);
        REQUIRE(held);
        queue_old_waiter("old/permit", 'P');
        CHECK_NOTHROW(held->release());
    }
    // (A select_for_update release swallows a failed wake-up: its rollback
    // ends the row lock too. Its statement skips '' all the same.)
}

// PostgreSQL: force_release was one statement, whose snapshot predates a
// reader that joined the group while it waited for the key's row. That
// reader's row stayed live and its renewals raised the key's row again.
TEST_CASE_TEMPLATE("force_release ends a reader that joined while it waited for the key's row", Db,
                   test::postgres_db) {
    Db db;
    auto a = db.open();
    auto breaker = db.open();
    auto first = a.try_acquire_shared("rw/joining", {.lease = 5s});
    REQUIRE(first);
    auto raw = test::raw_connection_for(db.url());
    // A second reader's grant, not yet committed: it holds the key's row.
    raw->begin();
    raw->exec("SELECT * FROM " + db.prefix + "grant_shared('rw/joining', 'late-reader', 5000, 'test', NULL, " +
              "9223372036854775807, -9223372036854775808)");
    std::int64_t forced = 0;
    std::string failed;
    std::thread force([&] {
        try {
            forced = breaker.force_release("rw/joining", "test");
        } catch (const std::exception& e) {
            failed = e.what();
        }
    });
    // force_release now waits for the key's row (its lock wait gives up after
    // row_lock_timeout, 200 ms).
    std::this_thread::sleep_for(100ms);
    raw->commit();
    force.join();
    REQUIRE(failed.empty());
    CHECK(forced > first->token());
    CHECK(raw->scalar("SELECT count(*) FROM " + db.table("holders") +
                      " WHERE lock_key = 'rw/joining' AND expires_at > clock_timestamp()") == 0);
    CHECK(raw->scalar("SELECT count(*) FROM " + db.table("locks") +
                      " WHERE lock_key = 'rw/joining' AND expires_at > clock_timestamp()") == 0);
}

TEST_CASE_TEMPLATE("a fenced write under a shared lease is refused once a writer was granted", Db, SERVER_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto raw = test::raw_connection_for(db.url());
    auto reader = a.try_acquire_shared("rw/fence", {.lease = 800ms, .auto_renew = false});
    REQUIRE(reader);
    raw->begin();
    CHECK_NOTHROW(raw->fence(*reader));
    raw->rollback();
    auto w = b.acquire("rw/fence", 10s);
    raw->begin();
    CHECK_THROWS_AS(raw->fence(*reader), sqlock::lease_lost_error);
    raw->rollback();
}

TEST_CASE_TEMPLATE("a writer whose lease ran out cannot pass its fence once readers hold the key", Db,
                   ALL_BACKENDS) {
    // Up to schema version 8 readers took the last writer's token and the
    // fence checked only the token and that the key's row was live, which
    // readers keep it: the stale writer's write committed beside theirs
    // (found by the fault campaign's check (h), docs/reliability.md).
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto raw = test::raw_connection_for(db.url());
    auto fence_passes = [&](const sqlock::lease& l) {
        raw->begin();
        bool passed = true;
        try {
            raw->fence(l);
        } catch (const sqlock::lease_lost_error&) {
            passed = false;
        }
        raw->rollback();
        return passed;
    };
    // A key first taken shared: its readers' fence passes (SQLite's compared
    // a token the shared grant left unset).
    auto fresh = b.try_acquire_shared("rw/fresh");
    REQUIRE(fresh);
    CHECK(fence_passes(*fresh));
    for (auto m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        const std::string key = std::string("rw/stale-writer/") + sqlock::to_string(m);
        auto w = a.try_acquire(key, {.mode = m, .lease = 2s, .auto_renew = false});
        REQUIRE(w);
        CHECK(fence_passes(*w));
        // The writer stops renewing; once its lease is over, readers take the key.
        std::optional<sqlock::lease> r1;
        REQUIRE(test::eventually([&] {
            r1 = b.try_acquire_shared(key);
            return r1.has_value();
        }));
        auto r2 = b.try_acquire_shared(key);
        REQUIRE(r2);
        CHECK(r1->token() > w->token());
        CHECK(r2->token() == r1->token());
        CHECK_FALSE(fence_passes(*w));
        CHECK(fence_passes(*r1));
        CHECK(fence_passes(*r2));
        r1->release();
        r2->release();
        auto w2 = a.try_acquire(key, {.mode = m});
        REQUIRE(w2);
        CHECK(w2->token() > r1->token());
        CHECK_FALSE(fence_passes(*r2));
        CHECK(fence_passes(*w2));
    }
}

TEST_CASE_TEMPLATE("sqlock::shared_mutex works with std::shared_lock and std::unique_lock", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    sqlock::shared_mutex m1(a, "rw/adapter");
    sqlock::shared_mutex m2(db.open(), "rw/adapter");
    {
        std::shared_lock r1(m1);
        std::shared_lock r2(m2);
        CHECK_FALSE(m2.try_lock());
        CHECK_FALSE(m2.try_lock_for(100ms));
    }
    {
        std::unique_lock w(m1);
        CHECK_FALSE(m2.try_lock_shared());
        CHECK_FALSE(m2.try_lock_shared_for(100ms));
    }
    CHECK(m2.try_lock_shared_until(std::chrono::steady_clock::now() + 1s));
    m2.unlock_shared();
}

// Two threads lock one adapter object (sqlock::mutex or sqlock::shared_mutex)
// whose lease runs out while the first is inside. The old adapters kept one
// lease slot for every thread: the second thread asked the database as soon
// as the first thread's lease ran out, won, and the first thread's unlock()
// then released the second's lease, so another client took the key while the
// second was inside.
template <class Mutex, class Db>
void threads_take_turns(Db& db, const std::string& key) {
    auto other = db.open();
    auto held = other.try_acquire(key);
    REQUIRE(held);
    Mutex m(db.open(), key, {.lease = 1s, .auto_renew = false});
    std::mutex order_mu;
    std::vector<int> order;  // the threads, in the order lock() returned
    std::atomic<int> locked{0};
    std::atomic<bool> first_unlocked{false};
    std::optional<sqlock::lease> probe_while_second_holds;
    auto body = [&](int id) {
        m.lock();
        {
            std::lock_guard l(order_mu);
            order.push_back(id);
        }
        if (locked.fetch_add(1) == 0) {
            // The first: its lease (1 s, not renewed) runs out while it is
            // inside. It leaves once the other thread is in too, or after 2.5 s.
            test::eventually([&] { return locked.load() == 2; }, 2500ms);
            m.unlock();
            first_unlocked = true;
        } else {
            // The second: inside, with the first gone, the key is ours alone.
            CHECK(test::eventually([&] { return first_unlocked.load(); }, 10s));
            probe_while_second_holds = other.try_acquire(key);
            m.unlock();
        }
    };
    std::thread a(body, 1), b(body, 2);
    std::this_thread::sleep_for(100ms);
    held->release();
    // The first thread is inside, its 1 s lease run out: the key is free at
    // the database, but not in this process (try_lock: false, not a throw).
    std::this_thread::sleep_for(1500ms);
    CHECK(m.try_lock() == false);
    a.join();
    b.join();
    CHECK(order.size() == 2);
    CHECK_FALSE(probe_while_second_holds);
    CHECK(other.try_acquire(key));  // both unlocked
}

TEST_CASE_TEMPLATE("threads sharing a sqlock::mutex or shared_mutex hold it one at a time, lost lease or not", Db,
                   ALL_BACKENDS) {
    Db db;
    SUBCASE("sqlock::mutex") { threads_take_turns<sqlock::mutex>(db, "m/threads"); }
    SUBCASE("sqlock::shared_mutex") { threads_take_turns<sqlock::shared_mutex>(db, "rw/threads"); }
}

// A thread waiting in the process for another thread's unlock() stops at
// lock_options::cancel, as it would waiting at the database.
template <class Mutex, class Db>
void cancel_ends_the_wait(Db& db, const std::string& key) {
    std::stop_source stop;
    Mutex m(db.open(), key, {.cancel = stop.get_token()});
    m.lock();
    std::atomic<bool> cancelled{false}, ended{false};
    std::thread waiter([&] {
        try {
            m.lock();
            m.unlock();
        } catch (const sqlock::cancelled_error&) {
            cancelled = true;
        }
        ended = true;
    });
    std::this_thread::sleep_for(200ms);
    CHECK_FALSE(ended.load());  // waiting for our unlock()
    stop.request_stop();
    CHECK(test::eventually([&] { return ended.load(); }, 10s));
    m.unlock();  // lets a waiter that ignored the stop through, so that the test ends
    waiter.join();
    CHECK(cancelled.load());
    CHECK(m.try_lock());  // the cancelled thread left nothing behind
    m.unlock();
}

TEST_CASE_TEMPLATE("try_lock_for and try_lock_until take any std::chrono wait, as std::timed_mutex's do", Db,
                   ALL_BACKENDS) {
    // Converted to milliseconds as they were, hours::max() overflowed (UB)
    // and a negative wait was a config_error; std::timed_mutex waits for ever
    // on the first and tries once on the second.
    Db db;
    auto c = db.open_quiet();
    sqlock::mutex m(c, "wait/any");
    sqlock::shared_mutex sm(c, "wait/any-shared");
    std::atomic<bool> holding{false};
    std::thread holder([&] {
        m.lock();
        sm.lock();
        holding = true;
        std::this_thread::sleep_for(300ms);
        sm.unlock();
        m.unlock();
    });
    while (!holding.load()) std::this_thread::yield();
    CHECK(m.try_lock_for(std::chrono::hours::max()));  // waits for the other thread's unlock
    m.unlock();
    CHECK(sm.try_lock_shared_for(std::chrono::hours::max()));
    sm.unlock_shared();
    holder.join();
    CHECK(m.try_lock_for(-5s));  // not positive: one try, and the key is free
    m.unlock();
    CHECK(m.try_lock_until(std::chrono::system_clock::time_point::max()));
    m.unlock();
    CHECK(m.try_lock_until(std::chrono::steady_clock::time_point::min()));
    m.unlock();
    CHECK(sm.try_lock_for(std::chrono::duration<double>(0.25)));
    sm.unlock();
    CHECK(sm.try_lock_shared_until(std::chrono::steady_clock::now() - 1h));
    sm.unlock_shared();
}

TEST_CASE_TEMPLATE("unlocking a sqlock::mutex or shared_mutex never throws, even when the release fails", Db,
                   ALL_BACKENDS) {
    // std::lock_guard and std::unique_lock call unlock() from noexcept
    // destructors: a release that threw (the database away) terminated the
    // process there. The release's failure is logged; the lease expires.
    Db db;
    auto c = db.open_quiet();
    sqlock::mutex m(c, "unlock/fails", {.lease = 1s});
    sqlock::shared_mutex sm(c, "unlock/fails-shared", {.lease = 1s});
    m.lock();
    sm.lock_shared();
    sqlock::detail::set_fault_hook_for_testing([](sqlock::detail::fault_point p) {
        if (p == sqlock::detail::fault_point::release_sending)
            throw sqlock::connection_error("injected: the database is away");
    });
    CHECK_NOTHROW(m.unlock());
    CHECK_NOTHROW(sm.unlock_shared());
    sqlock::detail::set_fault_hook_for_testing(nullptr);
    CHECK(m.held() == nullptr);
    // The turn passed on, and the leases the releases left expire: both can
    // be taken again.
    CHECK(m.try_lock_for(30s));
    m.unlock();
    CHECK(sm.try_lock_for(30s));
    sm.unlock();
}

TEST_CASE_TEMPLATE("a thread waiting for another thread's sqlock::mutex or shared_mutex stops at its cancel token", Db,
                   ALL_BACKENDS) {
    Db db;
    SUBCASE("sqlock::mutex") { cancel_ends_the_wait<sqlock::mutex>(db, "m/cancel"); }
    SUBCASE("sqlock::shared_mutex") { cancel_ends_the_wait<sqlock::shared_mutex>(db, "rw/cancel"); }
}

TEST_CASE_TEMPLATE("a semaphore grants at most its permits, and a released permit is granted again", Db,
                   ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    std::vector<sqlock::lease> held;
    for (int i = 0; i < 3; ++i) {
        auto p = (i % 2 ? a : b).try_acquire_permit("sem/pool", 3);
        REQUIRE(p);
        CHECK(p->kind() == sqlock::lease_kind::permit);
        if (!held.empty()) CHECK(p->token() > held.back().token());
        held.push_back(std::move(*p));
    }
    CHECK_FALSE(a.try_acquire_permit("sem/pool", 3));
    CHECK_FALSE(b.try_acquire_permit("sem/pool", 5));  // the limit is the semaphore's, not the caller's
    const auto listed = a.holders("sem/");
    REQUIRE(listed.size() == 3);
    CHECK(listed[0].permits == 3);
    CHECK(listed[0].kind == sqlock::lease_kind::permit);
    CHECK_THROWS_AS(held[0].fence_sql(), sqlock::config_error);
    held[1].release();
    auto again = a.try_acquire_permit("sem/pool", 3);
    REQUIRE(again);
    CHECK(again->token() > held[2].token());
    // A semaphore and a lock of the same name are separate.
    CHECK(a.try_acquire("sem/pool"));
}

// MariaDB's permit grant took the semaphore's row with INSERT IGNORE, which
// share-locks a row that exists, and then with SELECT ... FOR UPDATE: two
// grants at once both held the shared lock and both waited to make it
// exclusive, InnoDB ended one with deadlock 1213, and the grant read as
// contention, "no permit", while most permits were free
// (migrations/mysql/0017_utf8mb4_and_permit_lock.sql).
TEST_CASE_TEMPLATE("permit grants that arrive together are all granted while permits are free", Db,
                   ALL_BACKENDS) {
    Db db;
    constexpr int threads = 8, rounds = 100;
    constexpr std::int64_t permits = 2 * threads;
    std::vector<sqlock::client> clients;
    for (int i = 0; i < threads; ++i) clients.push_back(db.open());
    std::barrier together(threads);
    std::atomic<int> granted{0}, refused{0}, failed{0};
    std::mutex errors_mutex;
    std::set<std::string> errors;
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i)
        workers.emplace_back([&, i] {
            for (int r = 0; r < rounds; ++r) {
                together.arrive_and_wait();  // every thread's grant at once, every round
                try {
                    if (auto permit = clients[i].try_acquire_permit("sem/crowd", permits)) {
                        ++granted;
                        permit->release();
                    } else {
                        ++refused;
                    }
                } catch (const std::exception& e) {
                    ++failed;
                    std::lock_guard lock(errors_mutex);
                    errors.insert(e.what());
                }
            }
        });
    for (auto& w : workers) w.join();
    for (const auto& e : errors) MESSAGE(e);
    CHECK(refused.load() == 0);  // each thread holds at most one of 16 permits: there is always one free
    CHECK(failed.load() == 0);
    CHECK(granted.load() == threads * rounds);
}

TEST_CASE_TEMPLATE("a semaphore's waiter does not hold back the lock of the same name", Db, ALL_BACKENDS) {
    // They share the waiters table only. The lock's grant used to count a
    // permit waiter as ahead of it: with one waiting for a permit, the lock
    // of that name could not be taken at all.
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto only = a.try_acquire_permit("sem/apart", 1);
    REQUIRE(only);
    std::optional<sqlock::lease> got;
    std::thread waiter([&] { got.emplace(b.acquire_permit("sem/apart", 1, 30s)); });  // not fair
    REQUIRE(test::eventually([&] { return a.waiters("sem/apart").size() == 1; }));
    std::this_thread::sleep_for(20ms);  // past the 2 ms in which a newcomer may pass a waiter
    auto lock = a.try_acquire("sem/apart");
    CHECK(lock);
    if (lock) lock->release();
    CHECK(db.open().acquire("sem/apart", 5s).token() > 0);  // a blocking acquire too, once it is free
    CHECK(a.waiters("sem/apart").size() == 1);               // the permit waiter still waits
    only->release();
    waiter.join();
    REQUIRE(got);
    CHECK(got->kind() == sqlock::lease_kind::permit);
}

TEST_CASE_TEMPLATE("a semaphore's limit changes at run time; holders above a lowered limit keep their permits", Db,
                   ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto p1 = a.try_acquire_permit("sem/limit", 2);
    auto p2 = a.try_acquire_permit("sem/limit", 2);
    REQUIRE(p1);
    REQUIRE(p2);
    a.set_permits("sem/limit", 1);
    CHECK_FALSE(p1->lost());
    CHECK_FALSE(p2->lost());
    p1->release();
    CHECK_FALSE(a.try_acquire_permit("sem/limit", 2));  // one live, limit one
    p2->release();
    auto p3 = a.try_acquire_permit("sem/limit", 2);
    REQUIRE(p3);
    CHECK_FALSE(a.try_acquire_permit("sem/limit", 2));
    a.set_permits("sem/limit", 3);
    CHECK(a.try_acquire_permit("sem/limit", 2));
}

TEST_CASE_TEMPLATE("a permit's loss is reported before its permit is granted again", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    std::atomic<int> lost_calls{0};
    auto fixed = a.try_acquire_permit("sem/lost", 1,
                                      {.lease = 800ms, .auto_renew = false,
                                       .on_lost = [&](const std::string&, std::int64_t) { ++lost_calls; }});
    REQUIRE(fixed);
    auto next = b.acquire_permit("sem/lost", 1, 10s);
    CHECK(fixed->lost());
    CHECK(next.token() > fixed->token());
    for (int i = 0; i < 200 && lost_calls == 0; ++i) std::this_thread::sleep_for(10ms);
    CHECK(lost_calls == 1);
    // An auto-renewed permit outlives its lease.
    next.release();
    auto renewed = a.try_acquire_permit("sem/lost", 1, {.lease = 600ms});
    REQUIRE(renewed);
    std::this_thread::sleep_for(1500ms);
    CHECK_FALSE(renewed->lost());
    CHECK_FALSE(b.try_acquire_permit("sem/lost", 1));
}

TEST_CASE_TEMPLATE("fair permit waiters are served in arrival order", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto only = a.try_acquire_permit("sem/fifo", 1);
    REQUIRE(only);
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    std::vector<sqlock::client> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(db.open());
    for (int i = 0; i < 3; ++i) {
        threads.emplace_back([&, i] {
            auto p = clients[static_cast<std::size_t>(i)].acquire_permit("sem/fifo", 1, 30s, {.fair = true});
            {
                std::lock_guard l(mu);
                order.push_back(i);
            }
            std::this_thread::sleep_for(50ms);
        });
        // The next waiter starts only once this one has its ticket.
        for (int t = 0; t < 500 && a.waiters("sem/fifo").size() < static_cast<std::size_t>(i + 1); ++t)
            std::this_thread::sleep_for(10ms);
        REQUIRE(a.waiters("sem/fifo").size() == static_cast<std::size_t>(i + 1));
    }
    only->release();
    for (auto& t : threads) t.join();
    CHECK(order == std::vector<int>{0, 1, 2});
}

// The pattern of fair_test's "a release wakes the head waiter's client": the
// waiter is in another client, whose doorbell counts in stats().wakeups.
TEST_CASE_TEMPLATE("a shared or permit release wakes the head waiter's client", Db, ALL_BACKENDS) {
    Db db;
    auto holder = db.open();
    auto waiter = db.open();
    REQUIRE(holder.capabilities().wake_ups);
    // Releases `held` once `wait` queued in the waiter's client and slept,
    // and returns whether that client's doorbell rang once.
    auto handoff = [&](sqlock::lease held, const std::string& key, auto wait) {
        std::thread t(wait);
        REQUIRE(test::eventually([&] { return holder.waiters(key).size() == 1; }));
        std::this_thread::sleep_for(300ms);  // asleep now (the holder's lease has 60 s left)
        const auto before = waiter.stats().wakeups;
        held.release();
        t.join();
        return test::eventually([&] { return waiter.stats().wakeups == before + 1; });
    };
    auto reader = holder.try_acquire_shared("wake/rw", {.lease = 60s});
    REQUIRE(reader);
    CHECK(handoff(std::move(*reader), "wake/rw", [&] { (void)waiter.acquire("wake/rw", 30s); }));
    auto permit = holder.try_acquire_permit("wake/sem", 1, {.lease = 60s});
    REQUIRE(permit);
    CHECK(handoff(std::move(*permit), "wake/sem", [&] { (void)waiter.acquire_permit("wake/sem", 1, 30s); }));
}

TEST_CASE_TEMPLATE("bad input to the new primitives is refused before any SQL", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open_quiet();
    (void)a.try_acquire_permit("sem/warm", 1);  // the schema check is behind us
    const auto before = a.stats().statements;
    CHECK_THROWS_AS((void)a.try_acquire_permit("sem/x", 0), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_permit("sem/x", -3), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_permit("sem/x", 2'000'000), sqlock::config_error);
    CHECK_THROWS_AS((void)a.acquire_permit("sem/x", 0, 1s), sqlock::config_error);
    CHECK_THROWS_AS(a.set_permits("sem/x", 0), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_permit("", 1), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_shared(""), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_shared("k", {.mode = sqlock::mode::select_for_update}), sqlock::config_error);
    CHECK_THROWS_AS((void)a.acquire_permit("sem/x", 1, 1s, {.mode = sqlock::mode::select_for_update}),
                    sqlock::config_error);
    CHECK(a.stats().statements == before);
}

TEST_CASE_TEMPLATE("readers overlap and a writer overlaps nobody, across processes", Db, ALL_BACKENDS) {
    constexpr int workers = 4, iterations = 200;
    Db db;
    (void)db.open();  // migrated once, before the workers start
    test::temp_dir dir;
    const std::string log = (dir.path / "events").string();
    auto children = spawn(workers, {"rw", db.url(), db.prefix, "rw/procs", std::to_string(iterations), "5", "2000",
                                    log});
    finish(children, iterations);
    const auto r = replay_log(log);
    CHECK(r.lines == workers * iterations * 2);
    CHECK(r.unbalanced == 0);
    CHECK(r.max_writers == 1);
    CHECK(r.readers_with_writer == 0);
    CHECK(r.max_readers > 1);  // readers did hold the key together
}

TEST_CASE_TEMPLATE("a writer is served while readers keep arriving, across processes", Db, ALL_BACKENDS) {
    constexpr int readers = 3, iterations = 60;
    Db db;
    auto c = db.open();
    test::temp_dir dir;
    const std::string log = (dir.path / "events").string();
    // Readers only, each holding 40 ms: together they keep the key shared.
    auto children = spawn(readers, {"rw", db.url(), db.prefix, "rw/stream", std::to_string(iterations), "0",
                                    "40000", log});
    for (int i = 0; i < 500 && c.holders("rw/stream").size() < 2; ++i) std::this_thread::sleep_for(5ms);
    auto w = c.acquire("rw/stream", 60s);
    // Granted while the readers still had turns to take.
    const auto seen = replay_log(log);
    CHECK(seen.lines < readers * iterations * 2);
    w.release();
    finish(children, iterations);
}

TEST_CASE_TEMPLATE("a semaphore never has more than N holders inside, across processes", Db, ALL_BACKENDS) {
    constexpr int workers = 6, iterations = 40, permits = 3;
    Db db;
    (void)db.open();
    test::temp_dir dir;
    const std::string log = (dir.path / "events").string();
    auto children = spawn(workers, {"sem", db.url(), db.prefix, "sem/procs", std::to_string(permits),
                                    std::to_string(iterations), "3000", log});
    finish(children, iterations);
    const auto r = replay_log(log);
    CHECK(r.lines == workers * iterations * 2);
    CHECK(r.unbalanced == 0);
    CHECK(r.max_permits <= permits);
    CHECK(r.max_permits > 1);
}

TEST_CASE_TEMPLATE("a kill -9ed permit holder's permit returns after its lease", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open();
    std::vector<test::child> holder;
    holder.emplace_back(std::vector<std::string>{test::worker_path(), "hold-permit", db.url(), db.prefix,
                                                 "sem/killed", "1", "1500"});
    const auto line = test::line_or_eof(holder[0].read_line(30s));
    REQUIRE(line.rfind("token ", 0) == 0);
    const auto token = std::stoll(line.substr(6));
    holder[0].signal(SIGKILL);
    CHECK(holder[0].wait() == 128 + SIGKILL);
    CHECK_FALSE(c.try_acquire_permit("sem/killed", 1));  // its lease still runs
    auto next = c.acquire_permit("sem/killed", 1, 20s);
    CHECK(next.token() > token);
    CHECK(c.sweep() >= 1);  // the dead permit's row
}

}  // TEST_SUITE
