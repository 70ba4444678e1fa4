// The campaign's checker. Its timeline is the host's CLOCK_REALTIME in ns
// ("rt" in every event, database timestamps in ms converted): the servers run
// on this host, so their clock is that clock (campaign.hpp).
//
// (a) Fenced writes never interleave: per key the ledger counter equals the
//     number of history rows, their seq values are 1..counter, and along seq
//     (commit order) tokens never go down, and one token never belongs to two
//     owners. A write the client saw fail ("rejected", "err") is not in the
//     history; one it saw succeed is. And no write commits after a later
//     owner exists: its database time (w_ms, read after its fence, before
//     its commit) is before the return of every grant of its key with a
//     larger token. (A fence keeps the key's fence row locked to its
//     commit, and every grant bumps that row: the grant commits after it.)
//     A token order along seq alone let a stale write through when the
//     next holder had not written yet. And a write the fence refused came
//     from a holder that said its lease was lost by a lease and a second
//     later (a refusal of a holder told nothing is a fence refusing a live
//     lease), unless the cell ended first.
// (b) Tokens: no token granted twice for a key (two owners), none above the
//     key's fence counter, and a grant that returned before another began
//     acquiring has the smaller token (restarts included: the runs span them).
// (c) Lost before the next grant: for consecutive grants A, B of a key (by
//     token), A's holder stopped claiming the key (reported lost, or began
//     releasing) before B's grant. B's grant time is taken as B's acquire
//     returning: the grant committed before that, usually well under a
//     millisecond before. (The lease row's acquired_at is no bound: it is the
//     grant statement's start, which may precede a wait for the row.) Excused, and counted apart, where the holder could not report:
//     it was dead (SIGKILL) by then, or stopped (SIGSTOP) when B was granted
//     or up to 1 s before (a holder that resumed earlier must have said so:
//     its deadline had passed), an operator forced the key free in between,
//     or (select_for_update only) the server ended its transaction (crash,
//     connection killed) - its exclusion is the transaction, which the
//     holder learns of at its next ping; fences (a) guard what it writes
//     meanwhile. Also excused, and counted apart: A's own acquire returned
//     after B's grant and reported the loss within 100 ms - a grant whose
//     answer came after its lease's deadline, handed out already lost, so
//     that A never claimed the key while B held it.
// (d) Jobs: no run key reported "ran" twice; the ledger's token is the
//     token of the run that ran; every run is succeeded once the orchestrator
//     (the next instance) has caught up; a succeeded run has exactly one
//     effect row with its token; a run whose holder was killed mid-body was
//     run again by another attempt.
// (e) Liveness: after each fault heals, how long until each affected key is
//     granted again, counted from when it became free (the heal, or its
//     holder's release when that came later) while a client was waiting for
//     it: the distribution, and how many samples exceed lease + 1 s.
//     Reported, not a violation.
// (f) No orphans after the clients stopped and a sweep ran: no live lease
//     row, no unique_insert row left, no waiter row, no live shared holder or
//     permit, every hot key acquirable, and the reader-writer key and all N
//     permits of the semaphore too.
//
// (g) and (h) judge acts (ledger::act): each is an instant t of database
//     time at which its holder's lease was live - the holder acquired before
//     reading t, and its fence (a permit: a read of its holder row) passed
//     after, in the transaction that recorded t - and a lease is live without
//     gaps from its grant to its end, since a renewal never revives an
//     expired lease. A holder's span, from its first act to its last, is
//     therefore inside its lease: spans that overlap are leases that were
//     live together. Acts acknowledged as committed must be in the table,
//     and acts the fence refused must not (as for (a)). Spans that only
//     touch (one ends at the microsecond another starts) do not overlap.
// (g) Semaphore N-bound: at no instant are more than N permits' spans of one
//     semaphore open, and no permit token belongs to two owners.
// (h) Reader-writer exclusion, per key: an exclusive holder's span overlaps
//     no other holder's (shared or exclusive); shared spans may overlap each
//     other (counted, to show they did). Along database time the acts'
//     tokens never go down (a group of readers draws a token as a writer
//     does, so a smaller one is a reader or writer already overtaken), and a
//     writer never acts after another holder acted with its token (up to
//     schema version 8 readers took the last writer's token, and a writer
//     whose lease had ended acted beside them).

#include "campaign/checker.hpp"

#include "campaign/campaign.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

using nlohmann::json;

namespace campaign {
namespace {

constexpr std::int64_t never = INT64_MAX;
constexpr std::int64_t ms = 1'000'000;

struct grant {
    int c = 0;
    std::string k, own, mode;
    std::int64_t tok = 0;
    std::int64_t rt0 = 0, rt = 0;  // acquire began, returned
    std::int64_t lost_rt = never, rel_rt = never;
    // When the grant happened, at the latest.
    std::int64_t granted() const { return rt; }
    // When its holder stopped claiming the key.
    std::int64_t claim_end() const { return std::min(lost_rt, rel_rt); }
    json brief() const { return {{"c", c}, {"tok", tok}, {"own", own.substr(0, 8)}, {"mode", mode}}; }
};

class tally {
public:
    void add(json detail) {
        ++count_;
        if (details_.size() < 20) details_.push_back(std::move(detail));
    }
    int count() const { return count_; }
    json to_json() const { return {{"violations", count_}, {"details", details_}}; }

private:
    int count_ = 0;
    json details_ = json::array();
};

// The p-th percentile (nearest rank below) of sorted values; 0 when empty.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, std::size_t p) {
    return sorted.empty() ? 0 : sorted[(sorted.size() - 1) * p / 100];
}

struct interval {
    std::int64_t from, to;
};

std::int64_t num(const json& j, const char* field, std::int64_t fallback = 0) {
    auto it = j.find(field);
    return it != j.end() && it->is_number() ? it->get<std::int64_t>() : fallback;
}

std::string str(const json& j, const char* field) {
    auto it = j.find(field);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What the orchestrator did, arranged for the checks.
struct fault_log {
    std::map<int, std::int64_t> death;          // client -> when it was killed or found dead
    std::map<int, std::vector<interval>> stops;  // client -> SIGSTOPped
    std::map<std::string, std::vector<interval>> forced;  // key -> release --force
    std::vector<interval> server_ended;          // crash or connections killed
    std::vector<json> trials;

    explicit fault_log(const std::vector<json>& faults) {
        for (const auto& f : faults) {
            const auto ev = str(f, "ev");
            if (ev == "died" || ev == "stuck") death.emplace(static_cast<int>(num(f, "c")), num(f, "rt"));
            if (ev != "fault" || f.contains("skipped")) continue;
            trials.push_back(f);
            const auto name = str(f, "f");
            const interval span{num(f, "rt0"), num(f, "rt1")};
            const int victim = f.contains("victim") ? static_cast<int>(num(f["victim"], "c")) : -1;
            if (name == "kill_holder" || name == "kill_waiter") death.emplace(victim, span.from);
            if (name == "stop_holder") stops[victim].push_back(span);
            if (name == "force_release") forced[str(f, "k")].push_back(span);
            if (name == "server_crash" || name == "conn_kill") server_ended.push_back(span);
        }
    }

    bool dead_by(int c, std::int64_t t) const {
        auto it = death.find(c);
        return it != death.end() && it->second <= t;
    }
    static bool any_between(const std::vector<interval>& spans, std::int64_t from, std::int64_t to) {
        return std::any_of(spans.begin(), spans.end(), [&](const interval& s) { return s.from <= to && s.to >= from; });
    }
    // Stopped at t, or resumed less than `after` before it.
    bool stopped_at(int c, std::int64_t t, std::int64_t after) const {
        auto it = stops.find(c);
        return it != stops.end() && std::any_of(it->second.begin(), it->second.end(), [&](const interval& s) {
                   return s.from <= t && t <= s.to + after;
               });
    }
    bool forced_between(const std::string& k, std::int64_t from, std::int64_t to) const {
        auto it = forced.find(k);
        return it != forced.end() && any_between(it->second, from, to);
    }
};

// Lock grants from the events, per key in token order.
std::map<std::string, std::vector<grant>> grants_of(const std::vector<json>& events) {
    std::map<std::pair<std::string, std::int64_t>, grant> by_token;
    std::vector<grant> duplicates;
    for (const auto& e : events) {
        if (str(e, "ev") != "grant") continue;
        grant g;
        g.c = static_cast<int>(num(e, "c"));
        g.k = str(e, "k");
        g.own = str(e, "own");
        g.mode = str(e, "mode");
        g.tok = num(e, "tok");
        g.rt0 = num(e, "rt0");
        g.rt = num(e, "rt");
        if (!by_token.emplace(std::pair{g.k, g.tok}, g).second) duplicates.push_back(g);
    }
    for (const auto& e : events) {
        const auto ev = str(e, "ev");
        auto it = by_token.find({str(e, "k"), num(e, "tok")});
        if (it == by_token.end()) continue;
        auto& g = it->second;
        if (ev == "lost" && num(e, "c") == g.c) g.lost_rt = std::min(g.lost_rt, num(e, "rt"));
        if (ev == "rel" && num(e, "c") == g.c) g.rel_rt = std::min(g.rel_rt, num(e, "rt0"));
    }
    std::map<std::string, std::vector<grant>> out;
    for (auto& [id, g] : by_token) out[g.k].push_back(g);
    for (auto& g : duplicates) out[g.k].push_back(g);
    for (auto& [k, list] : out)
        std::stable_sort(list.begin(), list.end(), [](const grant& a, const grant& b) { return a.tok < b.tok; });
    return out;
}

json check_writes(const cell_record& cell, const std::map<std::string, std::vector<grant>>& grants, json& counts) {
    tally t;
    // Per key, by token: the earliest return of a grant with a larger token.
    auto first_later_grant = [&](const std::string& k, std::int64_t tok) -> const grant* {
        auto it = grants.find(k);
        if (it == grants.end()) return nullptr;
        const grant* first = nullptr;
        for (const auto& g : it->second)
            if (g.tok > tok && (!first || g.granted() < first->granted())) first = &g;
        return first;
    };
    for (const auto& h : cell.history) {
        if (!h.contains("w_ms")) continue;
        const auto* later = first_later_grant(str(h, "k"), num(h, "tok"));
        if (later && num(h, "w_ms") * ms > later->granted())
            t.add({{"k", str(h, "k")}, {"what", "a write committed after a grant of a larger token returned"},
                   {"seq", num(h, "seq")}, {"tok", num(h, "tok")}, {"client", num(h, "c")},
                   {"after_grant", later->brief()}, {"by_ms", (num(h, "w_ms") * ms - later->granted()) / ms}});
    }
    std::map<std::string, std::vector<const json*>> rows;
    for (const auto& h : cell.history) rows[str(h, "k")].push_back(&h);
    std::set<std::int64_t> landed;
    for (const auto& h : cell.history) landed.insert(num(h, "wid"));
    for (const auto& c : cell.counters) {
        const auto k = str(c, "k");
        auto& list = rows[k];
        std::sort(list.begin(), list.end(), [](const json* a, const json* b) { return num(*a, "seq") < num(*b, "seq"); });
        if (num(c, "counter") != static_cast<std::int64_t>(list.size()))
            t.add({{"k", k}, {"what", "counter differs from the number of fenced writes"}, {"counter", num(c, "counter")},
                   {"writes", list.size()}});
        for (std::size_t i = 0; i < list.size(); ++i) {
            const auto& h = *list[i];
            if (num(h, "seq") != static_cast<std::int64_t>(i + 1))
                t.add({{"k", k}, {"what", "seq is not 1..counter"}, {"seq", num(h, "seq")}, {"expected", i + 1}});
            if (i == 0) continue;
            const auto& prev = *list[i - 1];
            if (num(h, "tok") < num(prev, "tok"))
                t.add({{"k", k}, {"what", "a write with an older token committed after a newer one"},
                       {"seq", num(h, "seq")}, {"tok", num(h, "tok")}, {"after_tok", num(prev, "tok")},
                       {"client", num(h, "c")}});
            else if (num(h, "tok") == num(prev, "tok") && str(h, "own") != str(prev, "own"))
                t.add({{"k", k}, {"what", "two owners wrote with one token"}, {"tok", num(h, "tok")}});
        }
    }
    // A fence refuses only a holder whose lease is gone, and that holder
    // says so (on_lost) by its next renewal or check, well within a lease:
    // a refusal of a holder that never said it within a lease and a second
    // is a fence refusing a live lease (a holder told nothing, its work
    // lost). Not judged where the cell ended first.
    const std::int64_t slack = (num(cell.meta, "lease_ms", 2000) + 1000) * ms;
    std::int64_t cell_end = 0;
    for (const auto& e : cell.events) cell_end = std::max(cell_end, num(e, "rt"));
    int ok = 0, rejected = 0, doubt = 0, failed = 0;
    for (const auto& e : cell.events) {
        if (str(e, "ev") != "write") continue;
        const auto res = str(e, "res");
        const auto wid = num(e, "wid");
        if (res == "ok") {
            ++ok;
            if (!landed.count(wid))
                t.add({{"what", "a write acknowledged as committed is not in the history"}, {"wid", wid}});
        } else if (res == "doubt") {
            ++doubt;
        } else {
            res == "rejected" ? ++rejected : ++failed;
            if (landed.count(wid))
                t.add({{"what", "a write reported as failed is in the history"}, {"wid", wid}, {"res", res}});
        }
        if (res != "rejected" || !e.contains("rt") || num(e, "rt") + slack > cell_end) continue;
        auto list = grants.find(str(e, "k"));
        if (list == grants.end()) continue;
        for (const auto& g : list->second)
            if (g.tok == num(e, "tok") && g.c == num(e, "c") && g.lost_rt > num(e, "rt") + slack)
                t.add({{"k", str(e, "k")}, {"what", "a fence refused a holder that did not say its lease was lost"},
                       {"holder", g.brief()}, {"wid", wid},
                       {"lost_after_ms", g.lost_rt == never ? json("never") : json((g.lost_rt - num(e, "rt")) / ms)}});
    }
    counts["fenced_writes"] = cell.history.size();
    counts["writes_ok"] = ok;
    counts["writes_rejected"] = rejected;
    counts["writes_doubt"] = doubt;
    counts["writes_failed"] = failed;
    return t.to_json();
}

json check_tokens(const cell_record& cell, const std::map<std::string, std::vector<grant>>& grants) {
    tally t;
    std::map<std::string, std::int64_t> fence;
    for (const auto& f : cell.fences) fence[str(f, "k")] = num(f, "tok");
    for (const auto& [k, list] : grants) {
        for (std::size_t i = 1; i < list.size(); ++i)
            if (list[i].tok == list[i - 1].tok)
                t.add({{"k", k}, {"what", "one token granted twice"}, {"a", list[i - 1].brief()}, {"b", list[i].brief()}});
        if (!list.empty() && list.back().tok > fence[k])
            t.add({{"k", k}, {"what", "a token above the key's fence counter"}, {"tok", list.back().tok},
                   {"fence", fence[k]}});
        // A grant that returned before another began acquiring came first:
        // its token must be smaller.
        std::vector<const grant*> by_return, by_start;
        for (const auto& g : list) {
            by_return.push_back(&g);
            by_start.push_back(&g);
        }
        std::sort(by_return.begin(), by_return.end(), [](auto* a, auto* b) { return a->rt < b->rt; });
        std::sort(by_start.begin(), by_start.end(), [](auto* a, auto* b) { return a->rt0 < b->rt0; });
        std::size_t j = 0;
        const grant* top = nullptr;
        for (const auto* g : by_start) {
            for (; j < by_return.size() && by_return[j]->rt < g->rt0; ++j)
                if (!top || by_return[j]->tok > top->tok) top = by_return[j];
            if (top && top->tok >= g->tok)
                t.add({{"k", k}, {"what", "a later grant has a token no larger than an earlier one"},
                       {"earlier", top->brief()}, {"later", g->brief()}});
        }
    }
    for (const auto& h : cell.history)
        if (num(h, "tok") > fence[str(h, "k")])
            t.add({{"k", str(h, "k")}, {"what", "a history token above the fence counter"}, {"tok", num(h, "tok")}});
    return t.to_json();
}

json check_lost_first(const std::map<std::string, std::vector<grant>>& grants, const fault_log& faults,
                      json& counts) {
    tally t;
    int pairs = 0, dead = 0, stopped = 0, forced = 0, server_ended = 0, late_at_grant = 0;
    std::vector<std::int64_t> margin;  // how long before B's grant A stopped claiming (ms)
    for (const auto& [k, list] : grants)
        for (std::size_t i = 1; i < list.size(); ++i) {
            const auto& a = list[i - 1];
            const auto& b = list[i];
            const auto g = b.granted();
            ++pairs;
            if (a.claim_end() < g) {
                margin.push_back((g - a.claim_end()) / ms);
                continue;
            }
            if (faults.dead_by(a.c, g)) ++dead;
            else if (faults.stopped_at(a.c, g, 1000 * ms)) ++stopped;
            else if (faults.forced_between(k, a.rt0, g)) ++forced;
            else if (a.mode == "select_for_update" &&
                     fault_log::any_between(faults.server_ended, a.rt0, g))
                ++server_ended;
            else if (a.rt >= g && a.lost_rt <= a.rt + 100 * ms)
                ++late_at_grant;  // A's acquire returned after B's grant, with the loss reported at once
            else
                t.add({{"k", k},
                       {"what", "a holder had not reported its lease lost when the next grant happened"},
                       {"a", a.brief()},
                       {"b", b.brief()},
                       {"a_claim_end_after_b_grant_ms",
                        a.claim_end() == never ? json("never") : json((a.claim_end() - g) / ms)}});
        }
    std::sort(margin.begin(), margin.end());
    counts["handoffs"] = pairs;
    json j = t.to_json();
    j["pairs"] = pairs;
    j["excused"] = {{"holder_dead", dead},
                    {"holder_stopped", stopped},
                    {"force_released", forced},
                    {"sfu_transaction_ended_by_server", server_ended},
                    {"returned_after_next_grant_and_reported_at_once", late_at_grant}};
    j["claim_end_before_next_grant_ms"] = {{"min", percentile(margin, 0)}, {"p50", percentile(margin, 50)}};
    return j;
}

json check_jobs(const cell_record& cell, const fault_log& faults, json& counts) {
    tally t;
    using run_id = std::pair<std::string, std::string>;
    std::map<run_id, const json*> ledger;
    for (const auto& r : cell.jobs) ledger[{str(r, "job"), str(r, "rk")}] = &r;
    std::map<run_id, std::vector<std::int64_t>> ran;
    std::map<std::tuple<std::string, std::string, std::int64_t>, int> effects;
    for (const auto& e : cell.effects) ++effects[{str(e, "job"), str(e, "rk"), num(e, "tok")}];
    // Bodies whose client never reported their outcome: killed mid-run?
    std::map<std::pair<int, run_id>, std::int64_t> open_body;
    std::vector<std::pair<run_id, std::int64_t>> killed;
    for (const auto& e : cell.events) {
        const auto ev = str(e, "ev");
        const run_id id{str(e, "job"), str(e, "rk")};
        const int c = static_cast<int>(num(e, "c"));
        if (ev == "job_body") open_body[{c, id}] = num(e, "tok");
        if (ev == "job_out" || ev == "job_fail") open_body.erase({c, id});
        if (ev == "job_out" && str(e, "status") == "ran") ran[id].push_back(num(e, "tok"));
    }
    for (const auto& [who, tok] : open_body)
        if (faults.death.count(who.first)) killed.emplace_back(who.second, tok);
    int succeeded = 0;
    for (const auto& [id, row] : ledger) {
        const auto status = str(*row, "status");
        const auto tok = num(*row, "tok");
        const json where{{"job", id.first}, {"rk", id.second}};
        if (status != "succeeded") {
            t.add({{"run", where}, {"what", "not succeeded after the next instance caught up"}, {"status", status},
                   {"attempts", num(*row, "attempts")}});
            continue;
        }
        ++succeeded;
        auto r = ran.find(id);
        if (r != ran.end() && r->second.size() > 1)
            t.add({{"run", where}, {"what", "reported ran more than once"}, {"times", r->second.size()}});
        if (r != ran.end() && r->second.back() != tok)
            t.add({{"run", where}, {"what", "the ledger's token is not the token of the run that ran"}});
        if (effects[{id.first, id.second, tok}] != 1)
            t.add({{"run", where}, {"what", "a succeeded run has not exactly one effect with its token"},
                   {"effects", effects[{id.first, id.second, tok}]}});
    }
    int retried = 0;
    for (const auto& [id, tok] : killed) {
        auto it = ledger.find(id);
        if (it != ledger.end() && str(*it->second, "status") == "succeeded" && num(*it->second, "tok") != tok)
            ++retried;
        else
            t.add({{"run", {{"job", id.first}, {"rk", id.second}}}, {"what", "a run whose holder was killed was not run again"}});
    }
    counts["job_runs"] = ledger.size();
    counts["job_runs_succeeded"] = succeeded;
    counts["job_effects"] = cell.effects.size();
    json j = t.to_json();
    j["killed_mid_run"] = killed.size();
    j["retried"] = retried;
    return j;
}

json check_liveness(const cell_record& cell, const std::map<std::string, std::vector<grant>>& grants,
                    const fault_log& faults) {
    // Who was waiting for each key, when: from acquire's start to its grant or failure.
    std::map<std::string, std::vector<interval>> waits;
    for (const auto& e : cell.events) {
        const auto ev = str(e, "ev");
        if (ev == "grant" || ev == "acq_fail") waits[str(e, "k")].push_back({num(e, "rt0"), num(e, "rt")});
    }
    const std::int64_t lease_ms = num(cell.meta, "lease_ms", 2000);
    const int keys = static_cast<int>(num(cell.meta, "keys", 3));
    static const std::set<std::string> one_key{"kill_holder", "stop_holder", "starve_holder"};
    std::vector<std::int64_t> delays;
    json over = json::array(), never_granted = json::array();
    for (const auto& f : faults.trials) {
        const auto name = str(f, "f");
        if (name == "kill_waiter") continue;  // blocks no key
        std::vector<std::string> affected;
        if (one_key.count(name)) {
            if (!f.contains("victim") || str(f["victim"], "role") != "lock" || num(f["victim"], "key", -1) < 0) continue;
            affected.push_back(hot_key(static_cast<int>(num(f["victim"], "key"))));
        } else if (name == "force_release") {
            affected.push_back(str(f, "k"));
        } else {
            for (int i = 0; i < keys; ++i) affected.push_back(hot_key(i));
        }
        const auto heal = num(f, "rt1");
        for (const auto& k : affected) {
            auto it = grants.find(k);
            if (it == grants.end()) continue;
            const auto& list = it->second;
            const grant* next = nullptr;
            std::size_t at = 0;
            for (std::size_t i = 0; i < list.size(); ++i)
                if (list[i].granted() >= heal && (!next || list[i].granted() < next->granted())) {
                    next = &list[i];
                    at = i;
                }
            if (!next) {
                never_granted.push_back({{"f", name}, {"trial", num(f, "trial")}, {"k", k}});
                continue;
            }
            std::int64_t free_from = heal;
            if (at > 0 && list[at - 1].rel_rt != never) free_from = std::max(free_from, list[at - 1].rel_rt);
            // Only a key someone waited for when it became free says anything.
            if (!fault_log::any_between(waits[k], free_from, free_from)) continue;
            const auto d = std::max<std::int64_t>(next->granted() - free_from, 0) / ms;
            delays.push_back(d);
            if (d > lease_ms + 1000 && over.size() < 20)
                over.push_back({{"f", name}, {"trial", num(f, "trial")}, {"k", k}, {"ms", d}});
        }
    }
    std::sort(delays.begin(), delays.end());
    const auto over_count = std::count_if(delays.begin(), delays.end(), [&](auto d) { return d > lease_ms + 1000; });
    return {{"samples", delays.size()},         {"p50_ms", percentile(delays, 50)}, {"p90_ms", percentile(delays, 90)},
            {"p99_ms", percentile(delays, 99)}, {"max_ms", percentile(delays, 100)}, {"bound_ms", lease_ms + 1000},
            {"over_bound", over_count}, {"over", over},           {"never_granted", never_granted}};
}

// One holder's acts: its span of database time (us) and what it held.
struct span {
    std::string k, own, kind;
    std::int64_t tok = 0, from = 0, to = 0;
    int c = 0, acts = 0;
    json brief() const {
        return {{"c", c}, {"kind", kind}, {"tok", tok}, {"own", own.substr(0, 8)}, {"from_us", from}, {"to_us", to}};
    }
};

bool overlap(const span& a, const span& b) { return a.from < b.to && b.from < a.to; }

// Acts of the given kinds, as spans per key (or semaphore), each by its start.
std::map<std::string, std::vector<span>> spans_of(const std::vector<json>& acts, const std::set<std::string>& kinds) {
    std::map<std::pair<std::string, std::string>, span> by_owner;
    for (const auto& a : acts) {
        if (!kinds.count(str(a, "kind"))) continue;
        const auto t = num(a, "t_us");
        auto [it, fresh] = by_owner.try_emplace({str(a, "k"), str(a, "own")});
        auto& s = it->second;
        if (fresh)
            s = {str(a, "k"), str(a, "own"), str(a, "kind"), num(a, "tok"), t, t, static_cast<int>(num(a, "c")), 0};
        s.from = std::min(s.from, t);
        s.to = std::max(s.to, t);
        ++s.acts;
    }
    std::map<std::string, std::vector<span>> out;
    for (auto& [id, s] : by_owner) out[s.k].push_back(s);
    for (auto& [k, list] : out)
        std::sort(list.begin(), list.end(), [](const span& a, const span& b) { return a.from < b.from; });
    return out;
}

// Acts of the given kinds the client saw committed are in the table; those
// it saw refused or failed before the commit are not.
void check_act_acks(const cell_record& cell, const std::set<std::string>& kinds, tally& t, json& j) {
    std::set<std::int64_t> landed;
    for (const auto& a : cell.acts) landed.insert(num(a, "wid"));
    int ok = 0, rejected = 0, doubt = 0, failed = 0;
    for (const auto& e : cell.events) {
        if (str(e, "ev") != "act" || !kinds.count(str(e, "kind"))) continue;
        const auto res = str(e, "res");
        const auto wid = num(e, "wid");
        if (res == "ok") {
            ++ok;
            if (!landed.count(wid))
                t.add({{"what", "an act acknowledged as committed is not in the table"}, {"wid", wid}});
        } else if (res == "doubt") {
            ++doubt;
        } else {
            res == "rejected" ? ++rejected : ++failed;
            if (landed.count(wid))
                t.add({{"what", "an act reported as failed is in the table"}, {"wid", wid}, {"res", res}});
        }
    }
    j["acts_ok"] = ok;
    j["acts_rejected"] = rejected;
    j["acts_doubt"] = doubt;
    j["acts_failed"] = failed;
}

json check_semaphore(const cell_record& cell) {
    tally t;
    json j;
    const auto n = num(cell.meta, "permits", 0);
    int max_live = 0;
    std::size_t permits = 0;
    for (const auto& [name, list] : spans_of(cell.acts, {"P"})) {
        permits += list.size();
        std::map<std::int64_t, std::string> owner_of_token;
        for (const auto& s : list) {
            auto [it, fresh] = owner_of_token.emplace(s.tok, s.own);
            if (!fresh && it->second != s.own)
                t.add({{"k", name}, {"what", "one permit token acted for two owners"}, {"tok", s.tok}});
        }
        // The most spans open at once is reached at some span's start: count,
        // at each start, the spans open there (itself, and those begun
        // earlier that end later).
        for (std::size_t i = 0; i < list.size(); ++i) {
            std::vector<const span*> open{&list[i]};
            for (std::size_t p = 0; p < i; ++p)
                if (list[p].from <= list[i].from && list[i].from < list[p].to) open.push_back(&list[p]);
            for (std::size_t p = i + 1; p < list.size() && list[p].from == list[i].from; ++p)
                if (list[i].from < list[p].to) open.push_back(&list[p]);
            max_live = std::max(max_live, static_cast<int>(open.size()));
            if (static_cast<std::int64_t>(open.size()) > n) {
                json who = json::array();
                for (const auto* s : open) who.push_back(s->brief());
                t.add({{"k", name}, {"what", "more than N permits acted together"}, {"n", n},
                       {"live", open.size()}, {"at_us", list[i].from}, {"permits", who}});
            }
        }
    }
    check_act_acks(cell, {"P"}, t, j);
    auto out = t.to_json();
    out.update(j);
    out["n"] = n;
    out["permits"] = permits;
    out["max_live"] = max_live;
    return out;
}

json check_rw(const cell_record& cell) {
    tally t;
    json j;
    int exclusive = 0, shared = 0, shared_overlaps = 0;
    for (const auto& [k, list] : spans_of(cell.acts, {"S", "X"})) {
        for (std::size_t i = 0; i < list.size(); ++i) {
            (list[i].kind == "X" ? exclusive : shared) += 1;
            for (std::size_t p = i + 1; p < list.size() && list[p].from < list[i].to; ++p) {
                if (!overlap(list[i], list[p])) continue;
                if (list[i].kind == "S" && list[p].kind == "S") {
                    ++shared_overlaps;
                    continue;
                }
                t.add({{"k", k}, {"what", "an exclusive holder acted while another holder of the key did"},
                       {"a", list[i].brief()}, {"b", list[p].brief()}});
            }
        }
    }
    // Along database time, per key: tokens never go down, and a writer never
    // acts after another owner acted with its token.
    std::map<std::string, std::vector<const json*>> by_key;
    for (const auto& a : cell.acts)
        if (str(a, "kind") != "P") by_key[str(a, "k")].push_back(&a);
    for (auto& [k, list] : by_key) {
        std::stable_sort(list.begin(), list.end(),
                         [](const json* a, const json* b) { return num(*a, "t_us") < num(*b, "t_us"); });
        std::int64_t top = INT64_MIN;
        std::map<std::int64_t, std::set<std::string>> owners_of_token;  // who acted with a token so far
        for (const auto* a : list) {
            const auto tok = num(*a, "tok");
            const auto own = str(*a, "own");
            const json brief{{"c", num(*a, "c")}, {"kind", str(*a, "kind")}, {"tok", tok}, {"own", own.substr(0, 8)},
                             {"t_us", num(*a, "t_us")}};
            if (tok < top)
                t.add({{"k", k}, {"what", "an act with a token older than one acted with before"}, {"act", brief},
                       {"after_tok", top}});
            auto& seen = owners_of_token[tok];
            if (str(*a, "kind") == "X" && (seen.size() > 1 || (seen.size() == 1 && !seen.count(own))))
                t.add({{"k", k}, {"what", "a writer acted after another holder acted with its token"}, {"act", brief}});
            seen.insert(own);
            top = std::max(top, tok);
        }
    }
    check_act_acks(cell, {"S", "X"}, t, j);
    auto out = t.to_json();
    out.update(j);
    out["exclusive_holders"] = exclusive;
    out["shared_holders"] = shared;
    out["shared_overlaps"] = shared_overlaps;
    return out;
}

json check_orphans(const cell_record& cell) {
    tally t;
    for (const auto& h : cell.holders)
        if (num(h, "live"))
            t.add({{"k", str(h, "k")}, {"what", str(h, "kind") == "P" ? "a live permit with no client left"
                                                                      : "a live shared holder with no client left"}});
    for (const auto& l : cell.locks) {
        if (num(l, "live")) t.add({{"k", str(l, "k")}, {"what", "a live lease with no client left"}});
        else if (str(l, "mode") == "unique_insert" && !str(l, "own").empty())
            t.add({{"k", str(l, "k")}, {"what", "an expired unique_insert row the sweep left"}});
    }
    for (const auto& w : cell.waiters) t.add({{"k", str(w, "k")}, {"what", "a waiter row with no waiter left"}});
    for (const auto& a : cell.acquirable)
        if (!a.value("ok", false)) t.add({{"k", str(a, "k")}, {"what", "a hot key a newcomer cannot take"}});
    return t.to_json();
}

}  // namespace

cell_record load_cell(const std::string& dir) {
    namespace fs = std::filesystem;
    cell_record cell;
    std::ifstream meta(dir + "/meta.json");
    cell.meta = json::parse(meta, nullptr, false);
    if (cell.meta.is_discarded()) throw std::runtime_error(dir + "/meta.json is missing or not JSON: did the cell finish?");
    for (const auto& entry : fs::directory_iterator(dir)) {
        const auto name = entry.path().filename().string();
        if (name.size() < 8 || name[0] != 'c' || !name.ends_with(".jsonl") ||
            name.find_first_not_of("0123456789", 1) != name.size() - 6)
            continue;
        const int id = std::stoi(name.substr(1));
        for (auto& e : read_lines(entry.path().string())) {
            e["c"] = id;
            cell.events.push_back(std::move(e));
        }
    }
    for (auto& e : read_lines(dir + "/orch.jsonl")) {
        const auto ev = e.value("ev", "");
        if (ev == "job_body" || ev == "job_out" || ev == "effect") {
            e["c"] = 0;
            cell.events.push_back(std::move(e));
        } else {
            cell.faults.push_back(std::move(e));
        }
    }
    cell.counters = read_lines(dir + "/counters.jsonl");
    cell.history = read_lines(dir + "/history.jsonl");
    cell.fences = read_lines(dir + "/fences.jsonl");
    cell.locks = read_lines(dir + "/locks.jsonl");
    cell.waiters = read_lines(dir + "/waiters.jsonl");
    cell.jobs = read_lines(dir + "/jobs.jsonl");
    cell.effects = read_lines(dir + "/effects.jsonl");
    cell.acquirable = read_lines(dir + "/acquirable.jsonl");
    cell.acts = read_lines(dir + "/acts.jsonl");
    cell.holders = read_lines(dir + "/holders.jsonl");
    return cell;
}

json check(const cell_record& cell) {
    const fault_log faults(cell.faults);
    const auto grants = grants_of(cell.events);
    json counts;
    std::size_t grant_count = 0;
    for (const auto& [k, list] : grants) grant_count += list.size();
    counts["grants"] = grant_count;
    counts["lost_reports"] = std::count_if(cell.events.begin(), cell.events.end(),
                                           [](const json& e) { return e.value("ev", "") == "lost"; });
    counts["trials"] = faults.trials.size();
    counts["holder_grants"] = std::count_if(cell.events.begin(), cell.events.end(),
                                            [](const json& e) { return e.value("ev", "") == "hgrant"; });
    counts["holder_lost_reports"] = std::count_if(cell.events.begin(), cell.events.end(),
                                                  [](const json& e) { return e.value("ev", "") == "hlost"; });
    counts["acts"] = cell.acts.size();
    json out;
    out["a_fenced_writes"] = check_writes(cell, grants, counts);
    out["b_tokens"] = check_tokens(cell, grants);
    out["c_lost_before_next_grant"] = check_lost_first(grants, faults, counts);
    out["d_jobs"] = check_jobs(cell, faults, counts);
    out["e_liveness"] = check_liveness(cell, grants, faults);
    out["f_orphans"] = check_orphans(cell);
    out["g_semaphore"] = check_semaphore(cell);
    out["h_reader_writer"] = check_rw(cell);
    int total = 0;
    for (const char* c : {"a_fenced_writes", "b_tokens", "c_lost_before_next_grant", "d_jobs", "f_orphans",
                          "g_semaphore", "h_reader_writer"})
        total += out[c]["violations"].get<int>();
    out["violations"] = total;
    out["counts"] = counts;
    out["meta"] = cell.meta;
    return out;
}

}  // namespace campaign
