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

// Acts of reader-writer and permit holders on top of the clean history: each
// holder (owner) acts at the given database times (us from t0), and its
// client saw each act committed.
struct acts {
    campaign::cell_record c = clean();
    std::int64_t wid = 5'000'000;
    explicit acts(std::int64_t permits = 3) { c.meta["permits"] = permits; }
    void add(const char* k, const char* kind, std::int64_t tok, const std::string& own, std::vector<std::int64_t> at) {
        for (auto t : at) {
            ++wid;
            c.acts.push_back({{"k", k}, {"kind", kind}, {"tok", tok}, {"own", own}, {"c", 9}, {"wid", wid},
                              {"t_us", t0 / 1000 + t}});
            c.events.push_back({{"ev", "act"}, {"c", 9}, {"k", k}, {"kind", kind}, {"tok", tok}, {"own", own},
                                {"wid", wid}, {"res", "ok"}});
        }
    }
    // A permit of s0 acting from `from` to `to`.
    void permit(std::int64_t tok, std::int64_t from, std::int64_t to) {
        add("s0", "P", tok, "p" + std::to_string(tok), {from, to});
    }
    json verdict() const { return campaign::check(c); }
};

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

// Token order along seq passed this: the stale holder wrote after the next
// holder's grant returned, but before that holder's first write.
TEST_CASE("campaign checker (a): a write committed after a grant of a larger token is an interleaving") {
    auto c = clean();
    c.counters[0]["counter"] = 3;
    c.history = {{{"k", "k0"}, {"seq", 1}, {"tok", 1}, {"own", "aaaa"}, {"c", 1}, {"wid", 1000001}, {"w_ms", t0 / ms + 5}},
                 {{"k", "k0"}, {"seq", 2}, {"tok", 1}, {"own", "aaaa"}, {"c", 1}, {"wid", 1000002}, {"w_ms", t0 / ms + 160}},
                 {{"k", "k0"}, {"seq", 3}, {"tok", 2}, {"own", "bbbb"}, {"c", 2}, {"wid", 2000001}, {"w_ms", t0 / ms + 170}}};
    c.events.push_back({{"ev", "write"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"own", "aaaa"}, {"wid", 1000002}, {"res", "ok"}});
    c.events.push_back({{"ev", "lost"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"rt", t0 + 140 * ms}});
    auto v = campaign::check(c);
    REQUIRE(violations(v, "a_fenced_writes") == 1);
    CHECK(v["a_fenced_writes"]["details"][0]["what"] == "a write committed after a grant of a larger token returned");
    CHECK(v["violations"] == 1);
    // The same write before that grant returned (at 150 ms) is in order.
    c.history[1]["w_ms"] = t0 / ms + 149;
    CHECK(campaign::check(c)["violations"] == 0);
}

// A refused write is a holder the fence found without its lease: that
// holder must say so. Before, refusals were only counted, and a fence that
// refused live holders (as SQLite's shared fence once did) showed only as a
// count someone had to notice.
TEST_CASE("campaign checker (a): a fence refusing a holder that never said its lease was lost") {
    auto c = clean();
    c.events.push_back({{"ev", "write"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"own", "aaaa"}, {"wid", 1000002},
                        {"res", "rejected"}, {"rt", t0 + 60 * ms}});
    c.events.push_back({{"ev", "tick"}, {"c", 0}, {"rt", t0 + 10'000 * ms}});  // the cell goes on
    SUBCASE("is a violation") {
        const auto v = campaign::check(c);
        REQUIRE(violations(v, "a_fenced_writes") == 1);
        CHECK(v["a_fenced_writes"]["details"][0]["what"] == "a fence refused a holder that did not say its lease was lost");
    }
    SUBCASE("passes when the holder said so within a lease and a second") {
        c.events.push_back({{"ev", "lost"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"rt", t0 + 900 * ms}});
        CHECK(campaign::check(c)["violations"] == 0);
    }
    SUBCASE("is not judged when the cell ended first") {
        c.events.pop_back();
        CHECK(campaign::check(c)["violations"] == 0);
    }
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
        // Granted beside holder 2, so that no ordering check trips instead.
        auto c = clean();
        c.events.push_back({{"ev", "grant"}, {"c", 4}, {"k", "k0"}, {"tok", 2}, {"own", "cccc"},
                            {"rt0", t0 + 50 * ms}, {"rt", t0 + 150 * ms}});
        const auto v = campaign::check(c);
        REQUIRE(violations(v, "b_tokens") == 1);
        CHECK(v["b_tokens"]["details"][0]["what"] == "one token granted twice");
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
    SUBCASE("is not excused by a stop that ended long before the grant") {
        // The holder resumed at 20 ms, its deadline passed: it had time to say so by 150 ms + 1 s.
        c.faults.push_back({{"ev", "fault"}, {"f", "stop_holder"}, {"victim", {{"c", 1}, {"role", "lock"}, {"key", 0}}},
                            {"rt0", t0 - 2000 * ms}, {"rt1", t0 - 1000 * ms}, {"trial", 1}});
        for (auto& e : c.events)
            if (e["ev"] == "grant" && e["c"] == 1) e["rt0"] = t0 - 2500 * ms;
        const auto v = campaign::check(c);
        CHECK(violations(v, "c_lost_before_next_grant") == 1);
        CHECK(v["c_lost_before_next_grant"]["excused"]["holder_stopped"] == 0);
    }
    SUBCASE("is excused when the holder's own grant came back after the next one, lost at once") {
        for (auto& e : c.events)
            if (e["ev"] == "grant" && e["c"] == 1) e["rt"] = t0 + 160 * ms;
        c.events.push_back({{"ev", "lost"}, {"c", 1}, {"k", "k0"}, {"tok", 1}, {"rt", t0 + 161 * ms}});
        const auto v = campaign::check(c);
        CHECK(violations(v, "c_lost_before_next_grant") == 0);
        CHECK(v["c_lost_before_next_grant"]["excused"]["returned_after_next_grant_and_reported_at_once"] == 1);
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

TEST_CASE("campaign checker (g): exactly N permits acting together pass") {
    acts a(3);
    a.permit(1, 0, 1000);
    a.permit(2, 100, 900);
    a.permit(3, 200, 800);
    a.permit(4, 1000, 2000);  // begins the microsecond permit 1 ends: they touch, no overlap
    a.permit(5, 900, 1500);   // after permit 2
    const auto v = a.verdict();
    CHECK(v["violations"] == 0);
    CHECK(v["g_semaphore"]["max_live"] == 3);
    CHECK(v["g_semaphore"]["permits"] == 5);
}

TEST_CASE("campaign checker (g): N + 1 permits acting together is a violation") {
    acts a(3);
    a.permit(1, 0, 1000);
    a.permit(2, 100, 900);
    a.permit(3, 200, 800);
    a.permit(4, 700, 1200);  // the fourth, while 1, 2 and 3 still act
    const auto v = a.verdict();
    CHECK(violations(v, "g_semaphore") == 1);
    CHECK(v["g_semaphore"]["max_live"] == 4);
    CHECK(v["violations"] == 1);
    SUBCASE("also when the extra permit acted only once, inside the others' spans") {
        acts b(2);
        b.permit(1, 0, 1000);
        b.permit(2, 100, 900);
        b.add("s0", "P", 3, "p3", {500});
        CHECK(violations(b.verdict(), "g_semaphore") == 1);
    }
    SUBCASE("one permit token acting for two owners") {
        acts b(3);
        b.permit(1, 0, 100);
        b.add("s0", "P", 1, "other", {200, 300});
        CHECK(violations(b.verdict(), "g_semaphore") == 1);
    }
    SUBCASE("an act the permit check refused that landed anyway") {
        acts b(3);
        b.permit(1, 0, 100);
        b.c.events.back()["res"] = "rejected";
        CHECK(violations(b.verdict(), "g_semaphore") == 1);
    }
}

TEST_CASE("campaign checker (h): readers may overlap each other, a writer nobody") {
    SUBCASE("overlapping readers and writers in turn pass") {
        acts a;
        a.add("r0", "X", 3, "w3", {0, 100});
        a.add("r0", "S", 3, "ra", {200, 600});
        a.add("r0", "S", 3, "rb", {300, 700});
        a.add("r0", "S", 3, "rc", {650, 900});
        a.add("r0", "X", 4, "w4", {1000, 1500});
        a.add("r0", "S", 4, "rd", {1600, 1700});
        const auto v = a.verdict();
        CHECK(v["violations"] == 0);
        CHECK(v["h_reader_writer"]["shared_overlaps"] == 2);  // ra with rb, rb with rc
        CHECK(v["h_reader_writer"]["exclusive_holders"] == 2);
    }
    SUBCASE("a writer overlapping a reader") {
        acts a;
        a.add("r0", "S", 3, "ra", {200, 600});
        a.add("r0", "X", 4, "w4", {500, 900});
        CHECK(violations(a.verdict(), "h_reader_writer") >= 1);
    }
    SUBCASE("a writer overlapping a writer") {
        acts a;
        a.add("r0", "X", 3, "w3", {0, 600});
        a.add("r0", "X", 4, "w4", {500, 900});
        CHECK(violations(a.verdict(), "h_reader_writer") >= 1);
    }
    SUBCASE("a reader of an overtaken epoch acting after the writer") {
        acts a;
        a.add("r0", "X", 4, "w4", {0, 100});
        a.add("r0", "S", 3, "ra", {500});
        const auto v = a.verdict();
        CHECK(violations(v, "h_reader_writer") == 1);
        CHECK(v["h_reader_writer"]["details"][0]["what"] == "an act with a token older than one acted with before");
    }
    SUBCASE("a writer acting after readers of its own epoch, its lease over") {
        acts a;
        a.add("r0", "X", 3, "w3", {0});
        a.add("r0", "S", 3, "ra", {200, 300});
        a.add("r0", "X", 3, "w3", {900});  // its span also overlaps ra's
        const auto v = a.verdict();
        CHECK(violations(v, "h_reader_writer") == 2);
    }
    SUBCASE("keys are judged apart") {
        acts a;
        a.add("r0", "X", 3, "w3", {0, 600});
        a.add("r1", "X", 1, "v1", {100, 500});
        CHECK(a.verdict()["violations"] == 0);
    }
}

TEST_CASE("campaign checker (f): a live shared holder or permit after the sweep is an orphan") {
    auto c = clean();
    c.holders = {{{"kind", "S"}, {"k", "r0"}, {"own", "ffff"}, {"live", 1}},
                 {{"kind", "P"}, {"k", "s0"}, {"own", "gggg"}, {"live", 1}},
                 {{"kind", "P"}, {"k", "s0"}, {"own", "hhhh"}, {"live", 0}}};
    CHECK(violations(campaign::check(c), "f_orphans") == 2);
}

}  // TEST_SUITE
