#include "core/grant.hpp"

#include "core/row_lock.hpp"
#include "watchdog/clock.hpp"

namespace sqlock::detail {

grant::grant() = default;
grant::~grant() = default;

std::shared_ptr<grant> reentry_registry::find(std::string_view key) {
    std::shared_ptr<grant> g;
    {
        std::lock_guard lock(mu_);
        auto it = held_.find(std::make_pair(thread_serial(), std::string(key)));
        if (it == held_.end()) return nullptr;
        g = it->second.lock();
        if (!g) {
            held_.erase(it);
            return nullptr;
        }
    }
    std::lock_guard glock(g->mu);
    if (g->released.load() || !g->reentry_open.load() || g->lost.load() || lease_now_ns() >= g->deadline_ns.load())
        return nullptr;
    ++g->depth;
    return g;
}

void reentry_registry::add(const std::shared_ptr<grant>& g) {
    std::lock_guard lock(mu_);
    held_[std::make_pair(g->thread, g->key)] = g;
}

void reentry_registry::remove(const grant& g) {
    std::lock_guard lock(mu_);
    auto it = held_.find(std::make_pair(g.thread, g.key));
    if (it != held_.end() && it->second.lock().get() == &g) held_.erase(it);
}

}  // namespace sqlock::detail
