// The README's usage example, runnable: sqlock_example_basic [FILE.db]
#include <sqlock/sqlock.hpp>

#include <cstdio>
#include <mutex>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    const std::string file = argc > 1 ? argv[1] : "example.db";
    auto db = sqlock::client::open("sqlite:" + file);  // or postgresql://… or mysql://…
    db.migrate();                                       // idempotent

    // Run-once-at-a-time work: skip it when another process holds the key.
    if (auto lease = db.try_acquire("billing/close-day")) {
        std::printf("closing the day with fencing token %lld\n", static_cast<long long>(lease->token()));
    }  // released here

    // Wait up to 10 s for the key, else sqlock::timeout_error.
    sqlock::lease l = db.acquire("reports/nightly", 10s, {.mode = sqlock::mode::unique_insert, .lease = 60s,
                                                           .note = "nightly report"});
    std::printf("holding %s as %s (token %lld)\n", l.key().c_str(), l.owner().c_str(),
                static_cast<long long>(l.token()));
    l.release();

    // A distributed mutex for std::unique_lock / std::scoped_lock.
    sqlock::mutex m(db, "inventory/rebalance");
    {
        std::unique_lock guard(m);
        std::printf("inventory lock held with token %lld\n", static_cast<long long>(m.held()->token()));
    }
    return 0;
}
