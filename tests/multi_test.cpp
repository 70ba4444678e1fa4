// Multi-key locks (client::acquire_all), on every backend: the contract in
// one process, and no deadlock and no overlap across processes (tests/worker.cpp
// "multi").

#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

TEST_SUITE("multi") {

TEST_CASE_TEMPLATE("a multi-key lock holds every key, with a token per key, until released", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto before = a.try_acquire("set/b");
    REQUIRE(before);
    const auto old_b = before->token();
    before->release();
    auto set = a.try_acquire_all({"set/c", "set/a", "set/b"});
    REQUIRE(set);
    CHECK(set->keys() == std::vector<std::string>{"set/a", "set/b", "set/c"});
    CHECK(set->tokens().size() == 3);
    CHECK(set->token("set/b") > old_b);
    CHECK(set->tokens()[1] == set->token("set/b"));
    CHECK(set->at("set/c").key() == "set/c");
    CHECK_THROWS_AS((void)set->token("set/d"), sqlock::config_error);
    CHECK_FALSE(set->lost());
    CHECK_NOTHROW(set->check());
    for (const auto* k : {"set/a", "set/b", "set/c"}) {
        CAPTURE(k);
        CHECK_FALSE(b.try_acquire(k));
        CHECK(a.inspect(k).held);
    }
    CHECK_FALSE(b.try_acquire_all({"set/b", "set/x"}));
    CHECK(set->renew());
    set->release();
    set->release();  // idempotent
    auto again = b.try_acquire_all({"set/a", "set/b", "set/c"});
    REQUIRE(again);
    CHECK(again->token("set/a") > set->token("set/a"));
    // Moved: the new owner holds, the old one holds nothing.
    sqlock::multi_lease moved = std::move(*again);
    CHECK(again->keys().empty());
    CHECK(again->lost());
    CHECK_FALSE(moved.lost());
}

TEST_CASE_TEMPLATE("a set that finds a key busy holds none of its keys", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    auto busy = a.try_acquire("part/c", {.lease = 60s});
    REQUIRE(busy);
    // try_acquire_all took part/a and part/b before it found part/c busy.
    CHECK_FALSE(b.try_acquire_all({"part/a", "part/b", "part/c"}));
    CHECK_FALSE(a.inspect("part/a").held);
    CHECK_FALSE(a.inspect("part/b").held);
    // A waiting set queues for the busy key and holds none of the others meanwhile.
    std::optional<sqlock::multi_lease> got;
    std::thread waiter([&] { got.emplace(b.acquire_all({"part/c", "part/a", "part/b"}, 30s)); });
    REQUIRE(test::eventually([&] { return a.waiters("part/c").size() == 1; }));
    auto c = db.open();
    for (const auto* k : {"part/a", "part/b"}) {
        CAPTURE(k);
        auto l = c.try_acquire(k);
        CHECK(l);
    }
    busy->release();
    waiter.join();
    REQUIRE(got);
    CHECK_FALSE(got->lost());
    CHECK(a.waiters("part/").empty());
    // A set that times out leaves no key held and no waiter behind.
    got->release();
    auto blocker = a.try_acquire("part/b", {.lease = 60s});
    REQUIRE(blocker);
    CHECK_THROWS_AS((void)b.acquire_all({"part/a", "part/b"}, 300ms), sqlock::timeout_error);
    CHECK_FALSE(a.inspect("part/a").held);
    CHECK(a.waiters("part/").empty());
}

TEST_CASE_TEMPLATE("a set's loss is reported once, before another party is granted a key", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    std::atomic<int> lost_calls{0};
    auto set = a.try_acquire_all({"loss/a", "loss/b"},
                                 {.lease = 800ms,
                                  .auto_renew = false,
                                  .on_lost = [&](const std::string&, std::int64_t) { ++lost_calls; }});
    REQUIRE(set);
    const auto stop = set->stop_token();
    CHECK_FALSE(stop.stop_requested());
    auto other = b.acquire("loss/b", 10s);
    CHECK(set->lost());  // said before the other client got the key
    CHECK(stop.stop_requested());
    CHECK(other.token() > set->token("loss/b"));
    CHECK_THROWS_AS(set->check(), sqlock::lease_lost_error);
    // Both keys' leases ran out; the set's on_lost ran once.
    CHECK(test::eventually([&] { return lost_calls.load() >= 1; }));
    std::this_thread::sleep_for(300ms);
    CHECK(lost_calls == 1);
    CHECK(set->at("loss/a").lost());

    // An auto-renewed set outlives its lease.
    auto renewed = a.try_acquire_all({"loss/c", "loss/d"}, {.lease = 600ms});
    REQUIRE(renewed);
    std::this_thread::sleep_for(1500ms);
    CHECK_FALSE(renewed->lost());
    CHECK_FALSE(b.try_acquire("loss/d"));
}

TEST_CASE_TEMPLATE("bad input to a multi-key lock is refused before any SQL", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open_quiet();
    (void)a.try_acquire_all({"bad/warm"});  // the schema check is behind us
    const auto before = a.stats().statements;
    std::vector<std::string> many;
    for (std::size_t i = 0; i <= sqlock::max_keys_per_set; ++i) many.push_back("bad/" + std::to_string(i));
    CHECK_THROWS_AS((void)a.try_acquire_all({}), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_all({"bad/a", "bad/b", "bad/a"}), sqlock::config_error);
    CHECK_THROWS_AS((void)a.acquire_all({"bad/a", "bad/a"}, 1s), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_all(many), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_all({"bad/a", ""}), sqlock::config_error);
    CHECK_THROWS_AS((void)a.try_acquire_all({"bad/a", "bad/b"}, {.mode = sqlock::mode::select_for_update}),
                    sqlock::config_error);
    CHECK_THROWS_AS((void)a.acquire_all({"bad/a", "bad/b"}, -1s), sqlock::config_error);
    CHECK(a.stats().statements == before);
    many.pop_back();  // max_keys_per_set keys are fine
    CHECK(a.try_acquire_all(many));
}

// Single-key callers keep every key of a set busy in turn, each key always
// waited for by someone: a set that gave its queued key back whenever the
// next key was refused (a waiter of it had waited longer) queued at the back
// of that key's queue and met the same on the other key, round after round.
TEST_CASE_TEMPLATE("a set is granted while single-key callers keep each of its keys busy", Db, ALL_BACKENDS) {
    Db db;
    (void)db.open();
    std::atomic<bool> stop{false};
    std::vector<std::thread> traffic;
    for (const std::string key : {"starve/a", "starve/b"})
        for (int n = 0; n < 2; ++n)
            traffic.emplace_back([&, key] {
                auto c = db.open_quiet();
                while (!stop.load()) {
                    try {
                        auto l = c.acquire(key, 30s);
                        std::this_thread::sleep_for(20ms);
                        l.release();
                    } catch (const sqlock::error&) {
                    }
                }
            });
    std::this_thread::sleep_for(200ms);  // the traffic is under way
    auto set_client = db.open_quiet();
    std::string failed;
    try {
        auto set = set_client.acquire_all({"starve/a", "starve/b"}, 10s);
        CHECK(set.leases().size() == 2);
        set.release();
    } catch (const std::exception& e) {
        failed = e.what();
    }
    stop = true;
    for (auto& t : traffic) t.join();
    CAPTURE(failed);
    CHECK(failed.empty());
}

// A key the waiting set held and lost (here forced free) is given back, and
// its on_lost may still wait on the callback thread. It went through the
// signals the set was handed out with later: once armed, it fired the
// set's on_lost for a key the set held under a new token, and spent the
// set's one loss report.
TEST_CASE_TEMPLATE("a key lost and given back while a set waited does not fire the set's on_lost", Db, ALL_BACKENDS) {
    Db db;
    auto a = db.open();
    auto b = db.open();
    std::atomic<bool> gate{false};
    // Keeps a's callback thread busy until the gate opens.
    auto blocker = a.try_acquire("stale/x", {.lease = 300ms,
                                             .auto_renew = false,
                                             .on_lost = [&](const std::string&, std::int64_t) {
                                                 (void)test::eventually([&] { return gate.load(); }, 60s);
                                             }});
    REQUIRE(blocker);
    std::this_thread::sleep_for(600ms);
    auto hold_b = b.acquire("stale/b", 10s);
    std::atomic<int> set_lost{0};
    std::optional<sqlock::multi_lease> set;
    std::string failed;
    std::thread t([&] {
        try {
            set.emplace(a.acquire_all({"stale/a", "stale/b"}, 30s,
                                      {.lease = 900ms, .on_lost = [&](const std::string&, std::int64_t) { ++set_lost; }}));
        } catch (const std::exception& e) {
            failed = e.what();
        }
    });
    std::this_thread::sleep_for(400ms);  // past 200 ms of waiting: the set keeps stale/a
    REQUIRE(test::eventually([&] { return b.inspect("stale/a").held; }, 10s));
    const auto fenced = b.force_release("stale/a", "test");
    // The set finds its grant lost, gives it back and takes stale/a again.
    const bool again = test::eventually(
        [&] {
            const auto i = b.inspect("stale/a");
            return i.held && i.token > fenced;
        },
        20s);
    hold_b.release();
    t.join();
    gate = true;
    CAPTURE(failed);
    REQUIRE(again);
    REQUIRE(set);
    std::this_thread::sleep_for(500ms);  // the callback thread runs what waited
    CHECK_FALSE(set->lost());
    CHECK(set_lost.load() == 0);
    CHECK(set->token("stale/a") > fenced);
}

TEST_CASE_TEMPLATE("sets of overlapping keys in random orders never deadlock nor overlap, across processes", Db,
                   ALL_BACKENDS) {
    constexpr int workers = 4, iterations = 100;
    Db db;
    (void)db.open();  // migrated once, before the workers start
    test::temp_dir dir;
    std::vector<test::child> children;
    for (int i = 0; i < workers; ++i)
        children.emplace_back(std::vector<std::string>{test::worker_path(), "multi", db.url(), db.prefix,
                                                       "m/0,m/1,m/2,m/3", std::to_string(iterations), "3000",
                                                       dir.path.string(), "60000"});
    long waits = 0;
    for (auto& c : children) {
        CHECK(test::line_or_eof(c.read_line(240s)) == "done " + std::to_string(iterations));
        // With the locks left out (each worker under a table prefix of its
        // own) the inside files collide about a dozen times per worker.
        CHECK(test::line_or_eof(c.read_line(5s)) == "overlaps 0");
        CHECK(test::line_or_eof(c.read_line(5s)) == "timeouts 0");  // no call waited out its 60 s
        CHECK(test::line_or_eof(c.read_line(5s)) == "lost 0");
        const auto line = test::line_or_eof(c.read_line(5s));
        REQUIRE(line.rfind("waits ", 0) == 0);
        waits += std::stol(line.substr(6));
        CHECK(c.wait() == 0);
    }
    CHECK(waits > 0);  // sets did find keys busy and wait for them
    auto c = db.open();
    CHECK(c.locks("m/").empty());
    CHECK(c.waiters("m/").empty());
}

}  // TEST_SUITE
