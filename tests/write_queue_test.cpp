// SQLite's in-process write turn (src/dialects/sqlite/write_queue.hpp)
// without a database: exclusion, first-in-first-out among writers that had
// to wait, and no writer left waiting behind one that never stops asking.

#include "dialects/sqlite/write_queue.hpp"
#include "queue/wakeups.hpp"

#include "support/helpers.hpp"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

using sqlock::detail::write_queue;
using namespace std::chrono_literals;

namespace {

// Runs child() in a child of fork() and returns its exit code; a child still
// running after 60 s (hung: not a measure of speed) is killed, and gives -1.
int in_child(const std::function<int()>& child) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) ::_exit(child());
    int status = 0;
    for (int i = 0; i < 6000; ++i) {
        if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        std::this_thread::sleep_for(10ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
}

// test::eventually sleeps between looks, longer than the queue's patience.
void spin_until_queued(write_queue& q) {
    while (q.queued() != 1) std::this_thread::yield();
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("the write turn is held by one writer at a time") {
    write_queue q;
    int inside = 0, overlaps = 0;
    long long count = 0;  // not atomic: only right if the turn excludes
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 5000; ++i) {
                std::lock_guard turn(q);
                if (++inside != 1) ++overlaps;
                ++count;
                --inside;
            }
        });
    for (auto& t : threads) t.join();
    CHECK(overlaps == 0);
    CHECK(count == 8 * 5000);
}

TEST_CASE("writers that had to wait get the turn in the order they asked") {
    write_queue q;
    std::mutex order_mu;
    std::vector<int> order;
    q.lock();
    std::vector<std::thread> writers;
    for (int w = 0; w < 4; ++w) {
        writers.emplace_back([&, w] {
            std::lock_guard turn(q);
            std::lock_guard l(order_mu);
            order.push_back(w);
        });
        // The next writer asks only once this one is queued.
        REQUIRE(test::eventually([&] { return q.queued() == static_cast<std::size_t>(w + 1); }));
    }
    q.unlock();
    for (auto& t : writers) t.join();
    CHECK(order == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("a writer that never stops asking does not keep a queued writer waiting") {
    write_queue q;
    std::atomic<bool> stop{false};
    std::atomic<long long> hammered{0};
    std::thread hammer([&] {
        while (!stop.load()) {
            std::lock_guard turn(q);
            hammered.fetch_add(1);
        }
    });
    REQUIRE(test::eventually([&] { return hammered.load() > 1000; }));
    std::atomic<int> done{0};
    std::thread other([&] {
        for (int i = 0; i < 200; ++i) {
            std::lock_guard turn(q);
            done.fetch_add(1);
        }
    });
    // Liveness, not speed: the bound is generous.
    CHECK(test::eventually([&] { return done.load() == 200; }, 60s));
    stop = true;
    hammer.join();
    other.join();
}

TEST_CASE("a writer going to sleep hands the free turn to the queued writer at once") {
    write_queue q;
    // Served a queued writer just now, so that the queue is within its
    // patience: a give-back then keeps the turn free for the writer that
    // gave it back, and the queued writer waits out the patience.
    q.lock();
    std::thread served([&] { std::lock_guard turn(q); });
    spin_until_queued(q);
    q.unlock();
    served.join();
    q.lock();
    std::atomic<bool> got{false};
    std::thread next([&] {
        std::lock_guard turn(q);
        got = true;
    });
    spin_until_queued(q);
    q.unlock();
    // Within the patience the turn stays free and `next` stays queued (on a
    // machine so slow that 3 ms passed since `served`, unlock() handed it over).
    if (q.queued() == 1) {
        q.pass_on();
        CHECK(q.queued() == 0);  // handed over in pass_on, not at the end of the patience
    } else {
        MESSAGE("the patience had passed: unlock() handed the turn over itself");
    }
    next.join();
    CHECK(got.load());
    q.pass_on();  // nobody queued: nothing to do
    std::lock_guard turn(q);
}

TEST_CASE("a child of fork() has write turns of its own, free of its parent's") {
    // The process's write queue per SQLite file was inherited as it was at
    // the fork: a turn held by a parent thread, which the child does not
    // have, was never given back there, and a client the child opened on
    // the file waited for it for ever. (Only sqlock's own state: a child of
    // a process whose threads use SQLite must still exec before it uses
    // SQLite itself, whose global mutexes a parent thread may hold; README,
    // "Limitations".)
    const std::string file = "/sqlock-test/fork-" + std::to_string(::getpid()) + ".db";
    auto parent = sqlock::detail::write_queue_of(file);
    CHECK(sqlock::detail::write_queue_of(file) == parent);  // one queue per file in a process
    parent->lock();  // held across the fork, as by a thread in a statement
    const int code = in_child([&] {
        auto own = sqlock::detail::write_queue_of(file);
        if (own == parent) return 1;
        own->lock();  // hung here before
        own->unlock();
        return 0;
    });
    parent->unlock();
    CHECK(code == 0);
}

TEST_CASE("a child of fork() does not queue behind its parent's waiting threads") {
    // Inherited, the local wake-up queues held the parent's waiters, whose
    // threads the child does not have: a waiter of the child behind them was
    // never the head, so no release rang it, and it slept to its slowest
    // poll every time.
    namespace wakeups = sqlock::detail::wakeups;
    const std::string tables = "sqlite\nsqlock_\n/sqlock-test/fork.db";
    wakeups::spot parents;
    parents.place(tables, "k", 'X', false, 0, 1);
    const int code = in_child([&] {
        wakeups::spot mine;
        mine.place(tables, "k", 'X', false, 0, 2);
        const auto rings = mine.rings();
        wakeups::notify(tables, "k");
        return mine.heads() && mine.rings() == rings + 1 ? 0 : 1;
    });
    CHECK(code == 0);
    CHECK(parents.heads());  // the parent's own queue is untouched
}

}  // TEST_SUITE("unit")
