#pragma once
// The PostgreSQL dialect's statement canceller: one thread per dialect that
// cancels a statement (PQcancel) still running past the client's own bound.
// A header of its own because every statement of a session arms it
// (session.hpp) and the dialect owns it (postgres.cpp).

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace sqlock::detail::postgres {

// Cancels statements that run past the client's own bound. statement_timeout
// does not cover a commit waiting for a synchronous standby (SyncRep): on a
// primary whose synchronous standby is gone, or a promoted standby that
// inherited synchronous_standby_names, that wait never ends, and the server's
// kernel keeps acknowledging, so no TCP bound fires either. A cancelled
// SyncRep wait leaves the commit done locally but not replicated; pg_session
// reports that as a connection_error (its outcome is not durable).
// One thread per dialect, started on first use, stopped by the destructor.
class canceller {
public:
    ~canceller() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    // Cancels the statement running on `conn` if it is still running after `bound`.
    std::uint64_t arm(pqxx::connection& conn, std::chrono::milliseconds bound) {
        std::lock_guard lock(mu_);
        if (!thread_.joinable()) thread_ = std::thread([this] { main(); });
        const auto id = ++next_;
        const auto deadline = std::chrono::steady_clock::now() + bound;
        armed_[id] = {&conn, deadline};
        // Wake the thread only when it would sleep past this deadline (most
        // statements share one bound, so their deadlines come in order).
        if (deadline < wake_at_) cv_.notify_all();
        return id;
    }
    // True when the cancel was sent: the statement outlived the bound.
    bool disarm(std::uint64_t id) {
        std::lock_guard lock(mu_);  // a cancel under way finishes before the connection can go
        return armed_.erase(id) == 0;
    }

private:
    struct entry {
        pqxx::connection* conn;
        std::chrono::steady_clock::time_point deadline;
    };

    void main() {
        std::unique_lock lock(mu_);
        while (!stop_) {
            auto next = std::chrono::steady_clock::time_point::max();
            const auto now = std::chrono::steady_clock::now();
            for (auto it = armed_.begin(); it != armed_.end();) {
                if (it->second.deadline <= now) {
                    try {
                        it->second.conn->cancel_query();  // PQcancel: safe from another thread
                    } catch (const std::exception&) {
                        // The connection is gone: its statement fails on its own.
                    }
                    it = armed_.erase(it);
                } else {
                    next = std::min(next, it->second.deadline);
                    ++it;
                }
            }
            wake_at_ = next;
            if (next == std::chrono::steady_clock::time_point::max()) cv_.wait(lock);
            else cv_.wait_until(lock, next);
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::uint64_t, entry> armed_;
    std::uint64_t next_ = 0;
    std::chrono::steady_clock::time_point wake_at_ = std::chrono::steady_clock::time_point::min();
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace sqlock::detail::postgres
