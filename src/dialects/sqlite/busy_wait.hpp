#pragma once
// How a SQLite connection waits for another process's write lock.

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace sqlock::detail {

// How long a writer waits for another process's write lock, and how often
// it looks. SQLite's own busy timeout sleeps 1, 2, 5, 10, 15, 20, 25, ... ms
// between attempts, so a writer that met the lock three or four times came
// back after writers that had arrived 10-20 ms later: across processes the
// write lock went to whoever looked last, not first (the FIFO "inversions" of
// the fairness bench, where taking a ticket is such a write). Looking every
// millisecond keeps arrival order to about that; a look is one file-lock
// call, cheap beside the write it waits for.
class busy_wait {
public:
    void install(sqlite3* db, std::chrono::milliseconds limit) {
        limit_ = limit;
        sqlite3_busy_handler(db, &busy_wait::handler, this);
    }

private:
    static int handler(void* self, int attempts) {
        auto& me = *static_cast<busy_wait*>(self);
        const auto now = std::chrono::steady_clock::now();
        // A new wait: SQLite restarts its count only when a statement starts,
        // so a wait outside that (reading the schema, a checkpoint) may come
        // with the count of an earlier one; a gap no retry leaves tells it.
        if (attempts == 0 || now - me.last_ > std::chrono::milliseconds(50)) me.since_ = now;
        me.last_ = now;
        const auto left = me.since_ + me.limit_ - now;
        if (left <= std::chrono::steady_clock::duration::zero()) return 0;  // SQLITE_BUSY to the caller
        // The first looks come quickly: most write locks are held well under a millisecond.
        const std::chrono::steady_clock::duration pause =
            attempts < 3 ? std::chrono::microseconds(100) : std::chrono::microseconds(1000);
        std::this_thread::sleep_for(std::min(pause, left));
        return 1;
    }

    std::chrono::milliseconds limit_{0};
    std::chrono::steady_clock::time_point since_;  // when this wait began
    std::chrono::steady_clock::time_point last_;   // the handler's last call
};

}  // namespace sqlock::detail
