#pragma once
// Code the dialects share: no driver headers here, and nothing of the core.

#include "dialects/dialect.hpp"

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail {

// For each entry of a batch, whether its key (key_of(entry)) is among the
// keys a statement returned (renewed owners, live tickets).
template <class Entry, class Key, class KeyOf>
std::vector<bool> present_in(const std::vector<Entry>& batch, const std::set<Key>& returned, KeyOf key_of) {
    std::vector<bool> out;
    out.reserve(batch.size());
    for (const auto& e : batch) out.push_back(returned.count(Key(key_of(e))) > 0);
    return out;
}

// The schema_error for a missing table, pointing at migrate().
[[noreturn]] void throw_schema_missing(const std::string& where, const std::string& driver_message);

// A job-ledger row from a result row whose columns are, from 0: status,
// owner, holder, token, attempts, started ms, finished ms, retry ms, result,
// last error, the database clock in ms, job, run key — the order of every
// dialect's job_row.sql, job_lock.sql and job_list.sql. Row provides
// text(i) and integer(i), giving "" and 0 for NULL.
template <class Row>
job_row read_job_row(const Row& r) {
    job_row out;
    out.status = r.text(0);
    out.owner = r.text(1);
    out.holder = r.text(2);
    out.token = r.integer(3);
    out.attempts = static_cast<int>(r.integer(4));
    out.started_ms = r.integer(5);
    out.finished_ms = r.integer(6);
    out.retry_ms = r.integer(7);
    out.result = r.text(8);
    out.last_error = r.text(9);
    out.now_ms = r.integer(10);
    out.job = r.text(11);
    out.run_key = r.text(12);
    return out;
}

// The live lease a row describes, from its columns first .. first + 4:
// owner, mode, holder, note, remaining ms (NULL when no lease is live; then
// info is left alone). Row provides text(i), integer(i) and null(i).
template <class Row>
void read_lease(const Row& r, int first, lock_info& info) {
    if (r.null(first + 4)) return;
    info.held = true;
    info.owner = r.text(first);
    info.mode = r.text(first + 1);
    info.holder = r.text(first + 2);
    info.note = r.text(first + 3);
    info.expires_in = std::chrono::milliseconds(r.integer(first + 4));
}

// The counts of a row of every dialect's gauges.sql, whose columns are, from
// 0: the database clock in ms, live leases in unique_insert and in
// conditional_update, select_for_update holders, expired unique_insert rows,
// live waiters, fair ones, the longest wait in ms, dead waiters, and ledger
// rows running, succeeded and failed.
template <class Row>
database_gauges read_gauges(const Row& r) {
    database_gauges g;
    g.now = std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(r.integer(0)));
    g.held_unique_insert = r.integer(1);
    g.held_conditional_update = r.integer(2);
    g.held_select_for_update = r.integer(3);
    g.expired_locks = r.integer(4);
    g.waiters = r.integer(5);
    g.fair_waiters = r.integer(6);
    g.oldest_wait = std::chrono::milliseconds(r.integer(7));
    g.dead_waiters = r.integer(8);
    g.runs_running = r.integer(9);
    g.runs_succeeded = r.integer(10);
    g.runs_failed = r.integer(11);
    return g;
}

// A row of gauge_queues.sql: key, live waiters, the longest wait in ms.
template <class Row>
database_gauges::queue read_queue(const Row& r) {
    return {.key = r.text(0), .waiters = r.integer(1), .oldest_wait = std::chrono::milliseconds(r.integer(2))};
}

// A key whose row is locked with no live lease on it: a select_for_update holder has it.
inline void held_by_row_lock(lock_info& info) {
    info.held = true;
    info.mode = to_string(mode::select_for_update);
}

// The batch as a JSON array of {"k": key, "o": owner, "ms": lease} (and
// "t": kind for shared holders and permits), for
// dialects that unpack it in SQL (jsonb_to_recordset, json_each).
std::string renewals_json(const std::vector<renewal>& batch);
// The heartbeat batch as a JSON array of {"t": ticket, "ms": lease}.
std::string heartbeats_json(const std::vector<heartbeat>& batch);

// Why a lease is not held, from what a fence read ("" when it is held):
// current is the key's last token (none: never granted), lease_token the
// token of its lease row, live whether that lease is unexpired.
std::string fence_reason(std::string_view key, std::int64_t token, std::optional<std::int64_t> current,
                         std::optional<std::int64_t> lease_token, bool live);

// Percent-decodes a URL component; throws config_error on a bad escape.
std::string percent_decode(std::string_view s);

// text with every occurrence of every secret replaced by "***": for messages
// that carry a driver's own words, which may quote parts of a URL.
std::string scrub(std::string text, const std::vector<std::string>& secrets);

}  // namespace sqlock::detail
