// The watchdog's scheduling policy without a database: a keeper that records
// what it is asked and answers as told, and a clock the test moves by hand.

#include "watchdog/schedule.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <vector>

using sqlock::detail::keeper;
using sqlock::detail::lease_timing;
using sqlock::detail::renewal_schedule;
using sqlock::detail::ticket_timing;

namespace {

constexpr std::int64_t ms = 1'000'000;

struct recording_keeper : keeper {
    std::vector<std::vector<lease_timing*>> batches;
    std::vector<lease_timing*> pings, renewed_leases, lost_leases;
    std::vector<std::vector<ticket_timing*>> beats;
    result answer = result::renewed;       // for every lease
    std::int64_t sent = 0;                 // what outcomes say was sent
    std::vector<bool> live;                // heartbeat answers, per ticket (empty: all live)
    bool heartbeat_fails = false;
    int tickets_gone_calls = 0;
    std::int64_t periodic_due = sqlock::detail::never_ns;

    std::vector<outcome> renew(const std::vector<lease_timing*>& batch) override {
        batches.push_back(batch);
        return std::vector<outcome>(batch.size(), outcome{answer, sent});
    }
    outcome ping(lease_timing& lease) override {
        pings.push_back(&lease);
        return {answer, sent};
    }
    std::vector<bool> heartbeat(const std::vector<ticket_timing*>& batch) override {
        beats.push_back(batch);
        if (heartbeat_fails) throw std::runtime_error("the database is away");
        return live.empty() ? std::vector<bool>(batch.size(), true) : live;
    }
    void renewed(lease_timing& lease) override { renewed_leases.push_back(&lease); }
    void lost(lease_timing& lease) override { lost_leases.push_back(&lease); }
    void tickets_gone() override { ++tickets_gone_calls; }
    std::int64_t periodic(std::int64_t) override { return periodic_due; }
};

// A lease granted (confirmed) at `granted`: length in ms, renewal interval a third.
std::shared_ptr<lease_timing> lease_at(std::int64_t granted, std::int64_t lease_ms, bool pinged = false) {
    auto l = std::make_shared<lease_timing>();
    l->lease_ms = lease_ms;
    l->margin_ms = lease_ms / 10;
    l->interval_ns = lease_ms / 3 * ms;
    l->pinged = pinged;
    l->confirmed(granted);
    return l;
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("the watchdog renews nothing before it is due") {
    recording_keeper k;
    renewal_schedule schedule(500);
    const std::vector<std::shared_ptr<lease_timing>> leases{lease_at(0, 3000)};
    const auto r = schedule.round(999 * ms, k, leases, {});
    CHECK(k.batches.empty());
    CHECK(r.statements == 0);
    CHECK(r.next == 1000 * ms);  // when the renewal falls due
}

TEST_CASE("leases due within one interval are renewed together, in batches of renew_batch_size") {
    recording_keeper k;
    renewal_schedule schedule(2);
    // Five 3 s leases granted within 200 ms: due at 1000..1200 ms.
    std::vector<std::shared_ptr<lease_timing>> leases;
    for (int i = 0; i < 5; ++i) leases.push_back(lease_at(i * 50 * ms, 3000));
    k.sent = 1000 * ms;
    const auto r = schedule.round(1000 * ms, k, leases, {});
    REQUIRE(k.batches.size() == 3);  // 2 + 2 + 1
    CHECK(k.batches[0].size() == 2);
    CHECK(k.batches[2].size() == 1);
    CHECK(r.statements == 3);
    CHECK(k.renewed_leases.size() == 5);
    // Renewed: each deadline is the send time + lease - margin, and all fall due together again.
    for (const auto& l : leases) {
        CHECK(l->deadline_ns.load() == 1000 * ms + 2700 * ms);
        CHECK(l->next_renew_ns.load() == 2000 * ms);
    }
    CHECK(r.next == 2000 * ms);
}

TEST_CASE("select_for_update leases are pinged one by one, never batched") {
    recording_keeper k;
    renewal_schedule schedule(500);
    const std::vector<std::shared_ptr<lease_timing>> leases{lease_at(0, 3000, true), lease_at(0, 3000, true),
                                                            lease_at(0, 3000)};
    schedule.round(1000 * ms, k, leases, {});
    CHECK(k.pings.size() == 2);
    REQUIRE(k.batches.size() == 1);
    CHECK(k.batches[0].size() == 1);
}

TEST_CASE("a renewal that failed is retried within a quarter interval, at most 500 ms later") {
    recording_keeper k;
    renewal_schedule schedule(500);
    const auto short_lease = lease_at(0, 3000), long_lease = lease_at(0, 30000);
    k.answer = keeper::result::retry;
    k.sent = 1000 * ms;
    schedule.round(1000 * ms, k, {short_lease}, {});
    CHECK(short_lease->next_renew_ns.load() == 1000 * ms + 250 * ms);  // a quarter of its 1 s interval
    CHECK(short_lease->deadline_ns.load() == 2700 * ms);               // unmoved
    k.sent = 10'000 * ms;
    schedule.round(10'000 * ms, k, {long_lease}, {});
    CHECK(long_lease->next_renew_ns.load() == 10'000 * ms + 500 * ms);  // capped
    CHECK(k.renewed_leases.empty());
    CHECK(k.lost_leases.empty());
}

TEST_CASE("a renewal that finds the lease gone reports it lost") {
    recording_keeper k;
    renewal_schedule schedule(500);
    const std::vector<std::shared_ptr<lease_timing>> leases{lease_at(0, 3000)};
    k.answer = keeper::result::lost;
    schedule.round(1000 * ms, k, leases, {});
    REQUIRE(k.lost_leases.size() == 1);
    CHECK(k.lost_leases[0] == leases[0].get());
}

TEST_CASE("lost, released, fixed, expired and max_hold leases are left alone") {
    recording_keeper k;
    renewal_schedule schedule(500);
    auto lost = lease_at(0, 3000), released = lease_at(0, 3000), fixed = lease_at(0, 3000),
         expired = lease_at(0, 3000), held_too_long = lease_at(0, 3000);
    lost->lost = true;
    released->released = true;
    fixed->auto_renew = false;
    held_too_long->hold_until_ns = 500 * ms;
    const std::vector<std::shared_ptr<lease_timing>> leases{lost, released, fixed, held_too_long};
    schedule.round(1000 * ms, k, leases, {});
    CHECK(k.batches.empty());
    // Past its deadline: the deadline timer's, not the watchdog's.
    schedule.round(2800 * ms, k, {expired}, {});
    CHECK(k.batches.empty());
    CHECK(k.lost_leases.empty());
}

TEST_CASE("a late answer does not revive a lease lost meanwhile") {
    struct late_keeper final : recording_keeper {
        std::vector<outcome> renew(const std::vector<lease_timing*>& batch) override {
            for (auto* l : batch) l->lost = true;  // declared lost while the statement was under way
            return recording_keeper::renew(batch);
        }
    } k;
    renewal_schedule schedule(500);
    const std::vector<std::shared_ptr<lease_timing>> leases{lease_at(0, 3000)};
    k.sent = 1000 * ms;
    schedule.round(1000 * ms, k, leases, {});
    CHECK(k.renewed_leases.empty());
    CHECK(leases[0]->deadline_ns.load() == 2700 * ms);
}

TEST_CASE("waiter tickets are heartbeated when due, and gone ones reported once per round") {
    recording_keeper k;
    renewal_schedule schedule(500);
    std::vector<std::shared_ptr<ticket_timing>> tickets;
    for (int i = 0; i < 3; ++i) {
        auto t = std::make_shared<ticket_timing>();
        t->ticket = i + 1;
        t->interval_ns = 1000 * ms;
        t->next_beat_ns = 1000 * ms;
        tickets.push_back(t);
    }
    k.live = {true, false, false};
    schedule.round(1000 * ms, k, {}, tickets);
    REQUIRE(k.beats.size() == 1);
    CHECK(k.beats[0].size() == 3);
    CHECK(tickets[0]->next_beat_ns.load() == 2000 * ms);
    CHECK_FALSE(tickets[0]->gone.load());
    CHECK(tickets[1]->gone.load());
    CHECK(tickets[2]->gone.load());
    CHECK(k.tickets_gone_calls == 1);
    // A failed heartbeat is retried soon; gone tickets are not heartbeated again.
    k.heartbeat_fails = true;
    schedule.round(2000 * ms, k, {}, tickets);
    CHECK(k.beats.size() == 2);
    CHECK(k.beats[1].size() == 1);
    CHECK(tickets[0]->next_beat_ns.load() == 2000 * ms + 250 * ms);
}

TEST_CASE("the next round is at most a second away, sooner for periodic work or a deadline") {
    recording_keeper k;
    renewal_schedule schedule(500);
    CHECK(schedule.round(0, k, {}, {}).next == 1000 * ms);
    k.periodic_due = 300 * ms;
    CHECK(schedule.round(0, k, {}, {}).next == 300 * ms);
    k.periodic_due = sqlock::detail::never_ns;
    auto fixed = lease_at(0, 600);
    fixed->auto_renew = false;
    CHECK(schedule.round(0, k, {fixed}, {}).next == 540 * ms);  // its deadline
}

}  // TEST_SUITE("unit")
