// The campaign checker bites: a history that keeps every promise passes, and
// each kind of broken history is reported under the check it breaks. (The
// negative controls in scripts/faults.sh show the same on real runs.)

#include "campaign/checker.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using nlohmann::json;

namespace {

constexpr std::int64_t ms = 1'000'000;
const std::int64_t t0 = 1'800'000'000'000 * ms;  // some realtime, in ns

// Two clean handoffs of k0 (token 1 to client 1, then token 2 to client 2),
// one job run, nothing left behind.
campaign::cell_record clean() {
    campaign::cell_record c;
    c.meta = {{"lease_ms", 2000}, {"keys", 1}};
    auto grant = [&](int client, std::int64_t tok, const char* own, std::int64_t start, std::int64_t got) {
        c.events.push_back({{"ev", "grant"}, {"c", client}, {"k", "k0"}, {"tok", tok}, {"own", own},
                            {"mode", "conditional_update"}, {"rt0", t0 + start * ms}, {"rt", t0 + got * ms}});
    };
    auto write = [&](int client, std::int64_t tok, const char* own, std::int64_t wid, std::int64_t g_ms) {
        c.events.push_back({{"ev", "write"}, {"c", client}, {"k", "k0"}, {"tok", tok}, {"own", own}, {"wid", wid},
                            {"res", "ok"}, {"g_ms", g_ms}});
    };
    grant(1, 1, "aaaa", 0, 10);
    write(1, 1, "aaaa", 1000001, t0 / ms + 5);
    c.events.push_back({{"ev", "rel"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"rt0", t0 + 100 * ms}});
    grant(2, 2, "bbbb", 50, 150);
    write(2, 2, "bbbb", 2000001, t0 / ms + 140);
    c.events.push_back({{"ev", "rel"}, {"c", 2}, {"k", "k0"}, {"tok", 2}, {"rt0", t0 + 200 * ms}});
    c.counters = {{{"k", "k0"}, {"counter", 2}}};
    c.history = {{{"k", "k0"}, {"seq", 1}, {"tok", 1}, {"own", "aaaa"}, {"c", 1}, {"wid", 1000001}},
                 {{"k", "k0"}, {"seq", 2}, {"tok", 2}, {"own", "bbbb"}, {"c", 2}, {"wid", 2000001}}};
    c.fences = {{{"k", "k0"}, {"tok", 2}}};
    c.locks = {{{"k", "k0"}, {"own", ""}, {"mode", "conditional_update"}, {"live", 0}}};
    c.acquirable = {{{"k", "k0"}, {"ok", true}}};
    c.jobs = {{{"job", "j0"}, {"rk", "r1"}, {"status", "succeeded"}, {"tok", 7}, {"attempts", 1}}};
    c.effects = {{{"job", "j0"}, {"rk", "r1"}, {"tok", 7}}};
    c.events.push_back({{"ev", "job_body"}, {"c", 3}, {"job", "j0"}, {"rk", "r1"}, {"tok", 7}});
    c.events.push_back({{"ev", "job_out"}, {"c", 3}, {"job", "j0"}, {"rk", "r1"}, {"status", "ran"}, {"tok", 7}});
    return c;
}

int violations(const json& verdict, const char* check) { return verdict[check]["violations"].get<int>(); }

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("campaign checker: a clean history has no violations") {
    const auto v = campaign::check(clean());
    CHECK(v["violations"] == 0);
    CHECK(v["counts"]["grants"] == 2);
    CHECK(v["counts"]["fenced_writes"] == 2);
    CHECK(v["c_lost_before_next_grant"]["pairs"] == 1);
}

TEST_CASE("campaign checker (a): an older token committed after a newer one is an interleaving") {
    auto c = clean();
    c.counters[0]["counter"] = 3;
    c.history.push_back({{"k", "k0"}, {"seq", 3}, {"tok", 1}, {"own", "aaaa"}, {"c", 1}, {"wid", 1000002}});
    const auto v = campaign::check(c);
    CHECK(violations(v, "a_fenced_writes") == 1);
    CHECK(v["violations"] == 1);
}

TEST_CASE("campaign checker (a): counter, sequence and acknowledged writes must agree") {
    SUBCASE("a counter bumped without a history row") {
        auto c = clean();
        c.counters[0]["counter"] = 3;
        CHECK(violations(campaign::check(c), "a_fenced_writes") == 1);
    }
    SUBCASE("a write the fence rejected landed anyway") {
        auto c = clean();
        c.events.push_back({{"ev", "write"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"wid", 1000001}, {"res", "rejected"}});
        CHECK(violations(campaign::check(c), "a_fenced_writes") == 1);
    }
    SUBCASE("an acknowledged write is missing") {
        auto c = clean();
        c.events.push_back({{"ev", "write"}, {"c", 2}, {"k", "k0"}, {"tok", 2}, {"wid", 2000002}, {"res", "ok"}});
        CHECK(violations(campaign::check(c), "a_fenced_writes") == 1);
    }
    SUBCASE("a write in doubt may have landed or not") {
        auto c = clean();
        c.events.push_back({{"ev", "write"}, {"c", 2}, {"k", "k0"}, {"tok", 2}, {"wid", 2000002}, {"res", "doubt"}});
        CHECK(campaign::check(c)["violations"] == 0);
    }
}

TEST_CASE("campaign checker (b): tokens are never granted twice nor out of order") {
    SUBCASE("one token, two owners") {
        auto c = clean();
        c.events.push_back({{"ev", "grant"}, {"c", 4}, {"k", "k0"}, {"tok", 2}, {"own", "cccc"},
                            {"rt0", t0 + 300 * ms}, {"rt", t0 + 310 * ms}});
        CHECK(violations(campaign::check(c), "b_tokens") >= 1);
    }
    SUBCASE("a grant that returned before another began has the larger token") {
        auto c = clean();
        c.events.push_back({{"ev", "grant"}, {"c", 4}, {"k", "k0"}, {"tok", 9}, {"own", "cccc"},
                            {"rt0", t0 + 300 * ms}, {"rt", t0 + 310 * ms}});
        c.events.push_back({{"ev", "rel"}, {"c", 4}, {"k", "k0"}, {"tok", 9}, {"rt0", t0 + 320 * ms}});
        c.events.push_back({{"ev", "grant"}, {"c", 5}, {"k", "k0"}, {"tok", 3}, {"own", "dddd"},
                            {"rt0", t0 + 400 * ms}, {"rt", t0 + 410 * ms}});
        c.fences[0]["tok"] = 9;
        CHECK(violations(campaign::check(c), "b_tokens") >= 1);
    }
    SUBCASE("a token above the fence counter") {
        auto c = clean();
        c.fences[0]["tok"] = 1;
        CHECK(violations(campaign::check(c), "b_tokens") >= 1);
    }
}

TEST_CASE("campaign checker (c): the next grant before the holder said its lease was lost") {
    auto c = clean();
    // Holder 1 releases only at 500 ms, after holder 2's grant (by 150 ms).
    for (auto& e : c.events)
        if (e["ev"] == "rel" && e["c"] == 1) e["rt0"] = t0 + 500 * ms;
    SUBCASE("is a violation when the holder was alive and running") {
        CHECK(violations(campaign::check(c), "c_lost_before_next_grant") == 1);
    }
    SUBCASE("is excused when the holder had been killed") {
        c.faults.push_back({{"ev", "fault"}, {"f", "kill_holder"}, {"victim", {{"c", 1}, {"role", "lock"}, {"key", 0}}},
                            {"rt0", t0 + 60 * ms}, {"rt1", t0 + 61 * ms}, {"trial", 1}});
        const auto v = campaign::check(c);
        CHECK(violations(v, "c_lost_before_next_grant") == 0);
        CHECK(v["c_lost_before_next_grant"]["excused"]["holder_dead"] == 1);
    }
    SUBCASE("is excused when the holder was stopped") {
        c.faults.push_back({{"ev", "fault"}, {"f", "stop_holder"}, {"victim", {{"c", 1}, {"role", "lock"}, {"key", 0}}},
                            {"rt0", t0 + 60 * ms}, {"rt1", t0 + 400 * ms}, {"trial", 1}});
        CHECK(campaign::check(c)["c_lost_before_next_grant"]["excused"]["holder_stopped"] == 1);
    }
    SUBCASE("a lost report before the grant is enough") {
        c.events.push_back({{"ev", "lost"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"rt", t0 + 120 * ms}});
        CHECK(violations(campaign::check(c), "c_lost_before_next_grant") == 0);
    }
}

TEST_CASE("campaign checker (d): a job run succeeds once, with one effect, and killed runs are retried") {
    SUBCASE("ran twice") {
        auto c = clean();
        c.events.push_back({{"ev", "job_out"}, {"c", 4}, {"job", "j0"}, {"rk", "r1"}, {"status", "ran"}, {"tok", 7}});
        CHECK(violations(campaign::check(c), "d_jobs") >= 1);
    }
    SUBCASE("never finished") {
        auto c = clean();
        c.jobs[0]["status"] = "running";
        CHECK(violations(campaign::check(c), "d_jobs") == 1);
    }
    SUBCASE("succeeded without its effect") {
        auto c = clean();
        c.effects.clear();
        CHECK(violations(campaign::check(c), "d_jobs") == 1);
    }
    SUBCASE("a killed run that nobody ran again") {
        auto c = clean();
        c.jobs.push_back({{"job", "j0"}, {"rk", "r2"}, {"status", "running"}, {"tok", 8}, {"attempts", 1}});
        c.events.push_back({{"ev", "job_body"}, {"c", 3}, {"job", "j0"}, {"rk", "r2"}, {"tok", 8}});
        c.faults.push_back({{"ev", "fault"}, {"f", "kill_holder"}, {"victim", {{"c", 3}, {"role", "job"}, {"key", -1}}},
                            {"rt0", t0 + 60 * ms}, {"rt1", t0 + 61 * ms}, {"trial", 1}});
        const auto v = campaign::check(c);
        CHECK(violations(v, "d_jobs") == 2);  // not succeeded, and not retried
        CHECK(v["d_jobs"]["killed_mid_run"] == 1);
    }
}

TEST_CASE("campaign checker (e): the wait after a heal is measured from when the key was free") {
    auto c = clean();
    c.faults.push_back({{"ev", "fault"}, {"f", "server_freeze"}, {"rt0", t0 - 3000 * ms}, {"rt1", t0 + 20 * ms},
                        {"trial", 1}});
    const auto v = campaign::check(c);
    // Healed at 20 ms; k0 was held until 100 ms (client 2 waiting since
    // 50 ms), granted again by 150 ms.
    CHECK(v["e_liveness"]["samples"] == 1);
    CHECK(v["e_liveness"]["max_ms"] == 50);
    CHECK(v["e_liveness"]["over_bound"] == 0);
    SUBCASE("a key nobody waited for is no sample") {
        c.events.erase(std::remove_if(c.events.begin(), c.events.end(), [](const json& e) { return e["c"] == 2; }),
                       c.events.end());
        CHECK(campaign::check(c)["e_liveness"]["samples"] == 0);
    }
}

TEST_CASE("campaign checker (f): leftovers after the sweep are orphans") {
    auto c = clean();
    c.locks[0]["live"] = 1;
    c.waiters.push_back({{"k", "k0"}, {"own", "eeee"}});
    c.acquirable[0]["ok"] = false;
    CHECK(violations(campaign::check(c), "f_orphans") == 3);
}

}  // TEST_SUITE
