#include "queue/wakeups.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace sqlock::detail::wakeups {

struct registry {
    std::mutex mu;  // guards every spot's queue fields and ring count
    std::map<std::string, std::vector<spot*>, std::less<>> queues;

    static registry& get() {
        static registry r;  // never destroyed before the last client
        return r;
    }

    static std::string queue_of(std::string_view key, bool permits) {
        std::string q(permits ? "P" : "L");
        q += key;
        return q;
    }

    // a is served before b (sql/*/grant.sql: fair waiters by priority, then
    // ticket; the others after them, by ticket).
    static bool ahead(const spot* a, const spot* b) {
        if (a->fair_ != b->fair_) return a->fair_;
        if (a->fair_ && a->priority_ != b->priority_) return a->priority_ > b->priority_;
        return a->ticket_ < b->ticket_;
    }

    static spot* head(const std::vector<spot*>& q) {
        return q.empty() ? nullptr : *std::min_element(q.begin(), q.end(), ahead);
    }

    static void ring(spot& s) {
        ++s.rings_;
        s.cv_.notify_one();  // only its own thread waits on it
    }

    static void ring_queue(const std::vector<spot*>& q) {
        spot* const first = head(q);
        for (spot* s : q)
            if (s == first || s->shares_) ring(*s);
    }

    void ring_key(std::string_view key) {
        for (const bool permits : {false, true}) {
            const auto it = queues.find(queue_of(key, permits));
            if (it != queues.end()) ring_queue(it->second);
        }
    }
};

void spot::place(std::string_view key, char kind, bool fair, int priority, std::int64_t ticket) {
    leave(false);
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    queue_ = registry::queue_of(key, kind == 'P');
    shares_ = kind != 'X';
    fair_ = fair;
    priority_ = priority;
    ticket_ = ticket;
    r.queues[queue_].push_back(this);
}

void spot::leave(bool granted) noexcept {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    if (queue_.empty()) return;
    const auto it = r.queues.find(queue_);
    queue_.clear();
    if (it == r.queues.end()) return;
    auto& q = it->second;
    const bool headed = registry::head(q) == this;
    q.erase(std::remove(q.begin(), q.end(), this), q.end());
    if (q.empty()) {
        r.queues.erase(it);
    } else if (headed && !granted) {
        // It may have been rung for a key it will not take now: whoever
        // heads the queue after it must try in its place.
        registry::ring_queue(q);
    }
}

std::uint64_t spot::rings() const {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    return rings_;
}

bool spot::heads_locked() const {
    if (queue_.empty()) return true;
    auto& r = registry::get();
    const auto it = r.queues.find(queue_);
    return it == r.queues.end() || registry::head(it->second) == this;
}

bool spot::heads() const {
    std::lock_guard lock(registry::get().mu);
    return heads_locked();
}

void spot::wait(std::uint64_t seen, std::chrono::steady_clock::time_point head_until,
                std::chrono::steady_clock::time_point other_until, const std::function<bool()>& stop) {
    auto& r = registry::get();
    std::unique_lock lock(r.mu);
    cv_.wait_until(lock, heads_locked() ? head_until : other_until, [&] { return rings_ != seen || stop(); });
}

void spot::ring() {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    registry::ring(*this);
}

void notify(std::string_view key) {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    r.ring_key(key);
}

void notify_heads() {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    for (const auto& [name, q] : r.queues) registry::ring_queue(q);
}

void notify_all() {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    for (const auto& [name, q] : r.queues)
        for (spot* s : q) registry::ring(*s);
}

}  // namespace sqlock::detail::wakeups
