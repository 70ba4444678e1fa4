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
#include <vector>

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
    // True when the cancel was sent: the statement outlived the bound. A
    // cancel of this statement under way finishes first, so that the
    // connection cannot go while PQcancel uses it.
    bool disarm(std::uint64_t id) {
        std::unique_lock lock(mu_);
        for (;;) {
            const auto it = armed_.find(id);
            if (it == armed_.end()) return true;
            if (!it->second.cancelling) {
                armed_.erase(it);
                return false;
            }
            cancelled_.wait(lock);
        }
    }

private:
    struct entry {
        pqxx::connection* conn;
        std::chrono::steady_clock::time_point deadline;
        bool cancelling = false;
    };

    // PQcancel runs without mu_: it opens a connection to the server and
    // waits for its answer, which a server that is frozen while its kernel
    // still answers (SIGSTOP, a paused container) never sends. Under mu_,
    // every statement of the client then waited in arm(), those on a healthy
    // node after a failover too.
    void main() {
        std::unique_lock lock(mu_);
        while (!stop_) {
            auto next = std::chrono::steady_clock::time_point::max();
            const auto now = std::chrono::steady_clock::now();
            std::vector<std::uint64_t> due;
            for (auto& [id, e] : armed_) {
                if (e.cancelling) continue;
                if (e.deadline <= now) {
                    e.cancelling = true;
                    due.push_back(id);
                } else {
                    next = std::min(next, e.deadline);
                }
            }
            for (const auto id : due) {
                pqxx::connection* conn = armed_.at(id).conn;
                lock.unlock();
                try {
                    conn->cancel_query();  // PQcancel: safe from another thread
                } catch (const std::exception&) {
                    // The connection is gone: its statement fails on its own.
                }
                lock.lock();
                armed_.erase(id);  // disarm() waits for this while cancelling
                cancelled_.notify_all();
            }
            if (!due.empty()) continue;  // time has passed: look again
            wake_at_ = next;
            if (next == std::chrono::steady_clock::time_point::max()) cv_.wait(lock);
            else cv_.wait_until(lock, next);
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::condition_variable cancelled_;  // an entry's cancel has ended
    std::map<std::uint64_t, entry> armed_;
    std::uint64_t next_ = 0;
    std::chrono::steady_clock::time_point wake_at_ = std::chrono::steady_clock::time_point::min();
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace sqlock::detail::postgres
