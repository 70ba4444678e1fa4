#include "watchdog/schedule.hpp"

namespace sqlock::detail {

std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
    std::int64_t out;
    if (__builtin_add_overflow(a, b, &out)) return b > 0 ? never_ns : std::numeric_limits<std::int64_t>::min();
    return out;
}

std::int64_t ms_to_ns(std::int64_t ms) noexcept {
    std::int64_t out;
    if (__builtin_mul_overflow(ms, std::int64_t{1'000'000}, &out))
        return ms > 0 ? never_ns : std::numeric_limits<std::int64_t>::min();
    return out;
}

namespace {

// What one round takes of items of one kind: nothing unless something is due
// now; then, with it, everything that would fall due before the next round
// could come (the shortest interval among them). So renewals are never late,
// at most one interval early, and leases of equal length end up renewed
// together, one statement per batch. Lowers `next` to the earliest due time
// left.
template <class T, class Due, class Interval>
std::vector<T*> pick_due(const std::vector<T*>& items, std::int64_t now, std::int64_t& next, Due due_of,
                         Interval interval_of) {
    bool any_due = false;
    std::int64_t gap = never_ns;
    for (auto* x : items) {
        any_due = any_due || due_of(*x) <= now;
        gap = std::min(gap, interval_of(*x));
    }
    std::vector<T*> out;
    for (auto* x : items) {
        const std::int64_t due = due_of(*x);
        if (any_due && due - now < gap) out.push_back(x);
        else next = std::min(next, due);
    }
    return out;
}

}  // namespace

renewal_schedule::round_result renewal_schedule::round(std::int64_t now, keeper& k,
                                                       const std::vector<std::shared_ptr<lease_timing>>& leases,
                                                       const std::vector<std::shared_ptr<ticket_timing>>& tickets) const {
    round_result out;
    std::int64_t next = now + 1'000'000'000;  // look around at least once a second

    std::vector<lease_timing*> renewable;
    for (const auto& l : leases) {
        if (l->lost.load() || l->released.load()) continue;
        const std::int64_t deadline = l->deadline_ns.load();
        if (now >= deadline) continue;  // the deadline timer declares it lost
        next = std::min(next, deadline);
        if (l->auto_renew && now < l->hold_until_ns) renewable.push_back(l.get());
    }
    std::vector<lease_timing*> batch, pings;
    for (auto* l : pick_due(renewable, now, next, [](const lease_timing& x) { return x.next_renew_ns.load(); },
                            [](const lease_timing& x) { return x.interval_ns; }))
        (l->pinged ? pings : batch).push_back(l);

    auto apply = [&](lease_timing& l, const keeper::outcome& o) {
        switch (o.result) {
            case keeper::result::renewed:
                if (l.lost.load()) return;  // lost stays lost, whatever a late answer says
                l.confirmed(o.sent);
                k.renewed(l);
                return;
            case keeper::result::lost: k.lost(l); return;
            case keeper::result::retry: l.retry_soon(o.sent); return;
        }
    };
    for (std::size_t i = 0; i < batch.size(); i += batch_size_) {
        const std::vector<lease_timing*> chunk(batch.begin() + static_cast<std::ptrdiff_t>(i),
                                               batch.begin() + static_cast<std::ptrdiff_t>(std::min(i + batch_size_, batch.size())));
        const auto outcomes = k.renew(chunk);
        for (std::size_t j = 0; j < chunk.size(); ++j) apply(*chunk[j], outcomes.at(j));
        ++out.statements;
    }
    for (auto* l : pings) {
        apply(*l, k.ping(*l));
        ++out.statements;
    }
    for (auto* group : {&batch, &pings})
        for (auto* l : *group)
            if (!l->lost.load()) next = std::min({next, l->next_renew_ns.load(), l->deadline_ns.load()});

    // Waiter tickets are heartbeated the same way, in batches of their own.
    std::vector<ticket_timing*> queued;
    for (const auto& t : tickets)
        if (!t->gone.load()) queued.push_back(t.get());
    const auto beats = pick_due(queued, now, next, [](const ticket_timing& x) { return x.next_beat_ns.load(); },
                                [](const ticket_timing& x) { return x.interval_ns; });
    bool gone = false;
    for (std::size_t i = 0; i < beats.size(); i += batch_size_) {
        const std::vector<ticket_timing*> chunk(beats.begin() + static_cast<std::ptrdiff_t>(i),
                                                beats.begin() + static_cast<std::ptrdiff_t>(std::min(i + batch_size_, beats.size())));
        const std::int64_t sent = now;
        std::vector<bool> live;
        try {
            live = k.heartbeat(chunk);
        } catch (...) {
            // The database is away or slow: retry soon, well before the rows expire.
            for (auto* t : chunk) t->next_beat_ns = sent + std::min<std::int64_t>(t->interval_ns / 4, 500'000'000);
            continue;
        }
        for (std::size_t j = 0; j < chunk.size(); ++j) {
            if (live.at(j)) {
                chunk[j]->next_beat_ns = sent + chunk[j]->interval_ns;
            } else {
                chunk[j]->gone = true;
                gone = true;
            }
        }
    }
    if (gone) k.tickets_gone();
    for (auto* t : beats)
        if (!t->gone.load()) next = std::min(next, t->next_beat_ns.load());

    next = std::min(next, k.periodic(now));
    out.next = next;
    return out;
}

}  // namespace sqlock::detail
