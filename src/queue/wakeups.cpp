#include "queue/wakeups.hpp"

#include "dialects/common/per_process.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace sqlock::detail::wakeups {

struct registry {
    std::mutex mu;  // guards every spot's queue fields and ring count
    // By queue_of(): the queues of one set of tables sort together.
    std::map<std::string, std::vector<spot*>, std::less<>> queues;

    // Never destroyed before the last client; a child of fork() gets its own.
    static registry& get() { return per_process<registry>(); }

    // The queue names of one set of tables (dialect::tables()) start with
    // this, and no other's do: the length comes first.
    static std::string tables_part(std::string_view tables) {
        std::string q = std::to_string(tables.size());
        q += ':';
        q += tables;
        return q;
    }

    static std::string queue_of(std::string_view tables, std::string_view key, bool permits) {
        std::string q = tables_part(tables);
        q += permits ? 'P' : 'L';
        q += key;
        return q;
    }

    // Calls f on every queue of these tables.
    template <class F>
    void each_queue(std::string_view tables, F f) {
        const std::string part = tables_part(tables);
        for (auto it = queues.lower_bound(part); it != queues.end() && it->first.starts_with(part); ++it)
            f(it->second);
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

    void ring_key(std::string_view tables, std::string_view key) {
        for (const bool permits : {false, true}) {
            const auto it = queues.find(queue_of(tables, key, permits));
            if (it != queues.end()) ring_queue(it->second);
        }
    }
};

void spot::place(std::string_view tables, std::string_view key, char kind, bool fair, int priority,
                 std::int64_t ticket) {
    leave(false);
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    queue_ = registry::queue_of(tables, key, kind == 'P');
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

void notify(std::string_view tables, std::string_view key) {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    r.ring_key(tables, key);
}

void notify_heads(std::string_view tables) {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    r.each_queue(tables, [](const std::vector<spot*>& q) { registry::ring_queue(q); });
}

void notify_all(std::string_view tables) {
    auto& r = registry::get();
    std::lock_guard lock(r.mu);
    r.each_queue(tables, [](const std::vector<spot*>& q) {
        for (spot* s : q) registry::ring(*s);
    });
}

}  // namespace sqlock::detail::wakeups
