#include "campaign/ledger.hpp"

#include <utility>

using nlohmann::json;

namespace campaign {

ledger::ledger(std::string url, std::string prefix, int client, bool unfenced, event_log& log)
    : url_(std::move(url)), client_(client), unfenced_(unfenced), log_(log), sql_{backend_of(url_)},
      tables_{std::move(prefix)} {}

void ledger::fenced_write(const sqlock::lease& held, int phase) {
    // wid: unique across the cell, stored in the row, so the checker can tell
    // which logged writes landed (also those whose commit was in doubt).
    const std::int64_t wid = static_cast<std::int64_t>(client_) * 1'000'000 + ++writes_;
    json e{{"ev", "write"}, {"k", held.key()}, {"tok", held.token()}, {"own", held.owner()}, {"wid", wid},
           {"phase", phase}, {"m0", mono_ns()}, {"rt0", real_ns()}};
    transact(e, held, [&](test::raw_connection& raw) {
        const std::string key = "'" + held.key() + "'";
        raw.exec("UPDATE " + tables_.counters() + " SET counter = counter + 1 WHERE k = " + key);
        const auto seq = raw.scalar("SELECT counter FROM " + tables_.counters() + " WHERE k = " + key);
        const auto g = raw.scalar(sql_.acquired_ms(tables_, held.key(), held.owner()));
        const auto w = raw.scalar("SELECT " + sql_.now_ms());
        raw.exec("INSERT INTO " + tables_.history() + " (k, seq, token, owner, client, wid, g_ms, w_ms) VALUES (" +
                 key + ", " + std::to_string(seq) + ", " + std::to_string(held.token()) + ", '" + held.owner() +
                 "', " + std::to_string(client_) + ", " + std::to_string(wid) + ", " + std::to_string(g) + ", " +
                 std::to_string(w) + ")");
        e["seq"] = seq;
        e["g_ms"] = g;
        e["w_ms"] = w;
    });
}

bool ledger::effect(const sqlock::job_context& c) {
    json e{{"ev", "effect"}, {"job", c.job}, {"rk", c.run_key}, {"tok", c.token}, {"attempt", c.attempt}};
    return transact(e, c.lease, [&](test::raw_connection& raw) {
        raw.exec("INSERT INTO " + tables_.effects() + " (job, rk, token, owner, client, attempt, w_ms) VALUES ('" +
                 std::string(c.job) + "', '" + std::string(c.run_key) + "', " + std::to_string(c.token) + ", '" +
                 c.lease.owner() + "', " + std::to_string(client_) + ", " + std::to_string(c.attempt) + ", (" +
                 sql_.now_ms() + "))");
    });
}

void ledger::act(const sqlock::lease& held) {
    const std::int64_t wid = static_cast<std::int64_t>(client_) * 1'000'000 + ++writes_;
    const char kind = held.kind() == sqlock::lease_kind::permit   ? 'P'
                      : held.kind() == sqlock::lease_kind::shared ? 'S'
                                                                  : 'X';
    json e{{"ev", "act"}, {"k", held.key()}, {"kind", std::string(1, kind)}, {"tok", held.token()},
           {"own", held.owner()}, {"wid", wid}, {"m0", mono_ns()}, {"rt0", real_ns()}};
    transact(
        e, held,
        [&](test::raw_connection& raw) {
            const auto t_us = e["t_us"].get<std::int64_t>();
            raw.exec("INSERT INTO " + tables_.acts() + " (k, kind, token, owner, client, wid, t_us) VALUES ('" +
                     held.key() + "', '" + kind + "', " + std::to_string(held.token()) + ", '" + held.owner() + "', " +
                     std::to_string(client_) + ", " + std::to_string(wid) + ", " + std::to_string(t_us) + ")");
        },
        true);
}

// Runs body in a fenced transaction and logs e with its result: "ok",
// "rejected" (the fence said the lease is gone), "err" (failed before the
// commit: nothing written), or "doubt" (the commit itself failed: the
// history tells whether it landed).
//
// read_time: first read the database time into e["t_us"], before the
// transaction. The holder acquired before that read and its fence passed
// after it; a lease is live from its grant until it ends, without gaps (a
// renewal never revives an expired lease), so it was live at t_us.
template <class Body>
bool ledger::transact(json& e, const sqlock::lease& held, Body&& body, bool read_time) {
    std::string stage = "connect";
    try {
        if (!raw_) {
            raw_ = test::raw_connection_for(url_, std::chrono::seconds(3));
            if (sql_.backend == "mysql") raw_->exec("SET time_zone = '+00:00'");
        }
        if (read_time) {
            stage = "time";
            e["t_us"] = raw_->scalar("SELECT " + sql_.now_us());
        }
        stage = "begin";
        raw_->begin();
        stage = "fence";
        if (!unfenced_ && held.kind() != sqlock::lease_kind::permit) raw_->fence(held);
        if (!unfenced_ && held.kind() == sqlock::lease_kind::permit &&
            raw_->rows(sql_.permit_live(tables_, held.key(), held.owner())).empty())
            throw sqlock::lease_lost_error("the permit is not live by the database clock");
        stage = "write";
        body(*raw_);
        stage = "commit";
        raw_->commit();
        e["res"] = "ok";
    } catch (const sqlock::lease_lost_error& x) {
        e["res"] = "rejected";
        e["err"] = x.what();
        rollback();
    } catch (const std::exception& x) {
        e["res"] = stage == "commit" ? "doubt" : "err";
        e["stage"] = stage;
        e["err"] = x.what();
        raw_.reset();  // a connection that failed may be dead: start afresh next time
    }
    const bool ok = e["res"] == "ok";
    log_.write(std::move(e));
    return ok;
}

void ledger::rollback() {
    try {
        raw_->rollback();
    } catch (const std::exception&) {
        raw_.reset();
    }
}

}  // namespace campaign
