// sqlock::job_runner. A run goes: look at the ledger (a finished run needs no
// lease), take the run's lease, claim the run in a fenced transaction, run
// the body, record the outcome in another fenced transaction, release.

#include "core/client_impl.hpp"
#include "core/validate.hpp"
#include "dialects/common/fault.hpp"

#include <sqlock/errors.hpp>
#include <sqlock/jobs.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace sqlock {

namespace {

using sys_ms = std::chrono::sys_time<std::chrono::milliseconds>;

constexpr std::size_t max_job_bytes = 100;
constexpr std::size_t max_run_key_bytes = 128;
constexpr std::size_t max_result_bytes = 64 * 1024;
constexpr std::size_t max_error_bytes = 4000;

void validate_job(std::string_view job) {
    if (job.empty() || job.size() > max_job_bytes)
        throw config_error("job name must be 1 to 100 bytes (got " + std::to_string(job.size()) + ")");
    // No ':' keeps the lock key "job:<job>:<run key>" unambiguous.
    for (char c : job) {
        const auto u = static_cast<unsigned char>(c);
        if (c == ':' || u < 0x20 || u == 0x7f)
            throw config_error("job name '" + std::string(job) +
                               "' may not contain ':' or control characters (put variable parts in the run key)");
    }
    if (!detail::valid_utf8(job)) throw config_error("job name must be valid UTF-8");
}

void check_limit(std::size_t limit) {
    if (limit < 1 || limit > 100000) throw config_error("limit must be between 1 and 100000");
}

void validate_run_key(std::string_view run_key) {
    if (run_key.empty() || run_key.size() > max_run_key_bytes)
        throw config_error("run key must be 1 to 128 bytes of UTF-8 (got " + std::to_string(run_key.size()) +
                           " bytes; hash longer ids)");
    if (run_key.find('\0') != std::string_view::npos) throw config_error("run key contains a NUL byte");
    if (!detail::valid_utf8(run_key)) throw config_error("run key is not valid UTF-8");
}

void validate_options(const job_options& o) {
    if (o.max_attempts < 1 || o.max_attempts > 1000) throw config_error("max_attempts must be between 1 and 1000");
    if (o.wait < std::chrono::milliseconds::zero()) throw config_error("wait must not be negative");
    if (o.retry_backoff < std::chrono::milliseconds::zero() || o.max_backoff < o.retry_backoff)
        throw config_error("retry_backoff must not be negative and max_backoff not below it");
    detail::validate_duration("max_backoff", o.max_backoff, true);
    detail::validate_lock_options({.mode = o.mode, .lease = o.lease, .note = o.note});
}

// Text that any database accepts: valid UTF-8, bounded, cut at a character.
std::string storable(std::string_view text, std::size_t limit) {
    std::string out;
    out.reserve(std::min(text.size(), limit));
    for (char c : text) out.push_back(c == '\0' ? ' ' : c);
    if (!detail::valid_utf8(out)) {
        std::string clean;
        for (std::size_t i = 0; i < out.size();) {
            std::size_t len = 1;
            const auto c = static_cast<unsigned char>(out[i]);
            if (c >= 0xF0) len = 4;
            else if (c >= 0xE0) len = 3;
            else if (c >= 0xC0) len = 2;
            if (i + len <= out.size() && detail::valid_utf8(std::string_view(out).substr(i, len))) {
                clean.append(out, i, len);
                i += len;
            } else {
                clean.push_back('?');
                ++i;
            }
        }
        out = std::move(clean);
    }
    if (out.size() > limit) {
        std::size_t cut = limit;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
        out.resize(cut);
    }
    return out;
}

std::optional<sys_ms> time_of(std::int64_t ms) {
    if (ms == 0) return std::nullopt;
    return sys_ms(std::chrono::milliseconds(ms));
}

job_record to_record(const detail::job_row& r, std::string_view job, std::string_view run_key) {
    job_record out;
    if (r.status.empty()) return out;
    out.job = r.job.empty() ? std::string(job) : r.job;
    out.run_key = r.run_key.empty() ? std::string(run_key) : r.run_key;
    out.status = r.status == to_string(run_status::succeeded) ? run_status::succeeded
                 : r.status == to_string(run_status::failed)  ? run_status::failed
                                         : run_status::running;
    out.owner = r.owner;
    out.holder = r.holder;
    out.token = r.token;
    out.attempts = r.attempts;
    out.started_at = time_of(r.started_ms);
    out.finished_at = time_of(r.finished_ms);
    out.retry_at = time_of(r.retry_ms);
    out.result = r.result;
    out.last_error = r.last_error;
    return out;
}

std::chrono::milliseconds backoff(const job_options& o, int failed_attempt) {
    const int doublings = std::min(failed_attempt - 1, 30);
    const auto wait = o.retry_backoff.count() * (std::int64_t{1} << doublings);
    return std::chrono::milliseconds(std::min<std::int64_t>(wait, o.max_backoff.count()));
}

}  // namespace

const char* to_string(run_status s) noexcept {
    switch (s) {
        case run_status::running: return "running";
        case run_status::succeeded: return "succeeded";
        case run_status::failed: return "failed";
    }
    return "unknown";
}

const char* to_string(job_status s) noexcept {
    switch (s) {
        case job_status::ran: return "ran";
        case job_status::already_done: return "already_done";
        case job_status::busy: return "busy";
        case job_status::failed: return "failed";
        case job_status::lost: return "lost";
    }
    return "unknown";
}

job_runner::job_runner(client db, job_options options) : db_(std::move(db)), options_(std::move(options)) {
    validate_options(options_);
}

std::string job_runner::lock_key(std::string_view job, std::string_view run_key) {
    validate_job(job);
    validate_run_key(run_key);
    return "job:" + std::string(job) + ":" + std::string(run_key);
}

std::string job_runner::run_key(every period) {
    if (period.period <= std::chrono::milliseconds::zero())
        throw config_error("a job period must be positive (got " + std::to_string(period.period.count()) + " ms)");
    // The sweeper deletes a ledger row job_retention after its run started,
    // and a row deleted while its run key is in use lets the job run again.
    // A run key is handed out until its period ends and may be claimed a
    // while later (a caller that waited): so a period of half the retention
    // at most.
    const auto retention = db_.impl_->options().job_retention;
    if (retention.count() > 0 && period.period > retention / 2)
        throw config_error("a job period of " + std::to_string(period.period.count()) +
                           " ms is longer than half of client_options.job_retention (" +
                           std::to_string(retention.count()) +
                           " ms): the sweeper could delete the period's ledger row while the period's run key is "
                           "still in use and the job would run again; raise job_retention to at least twice the "
                           "period, or set it to zero (keep rows forever)");
    const auto now = db_.database_time().time_since_epoch().count();
    const auto p = period.period.count();
    const sys_ms start{std::chrono::milliseconds(now - now % p)};
    const auto day = std::chrono::floor<std::chrono::days>(start);
    const std::chrono::year_month_day ymd(day);
    const std::chrono::hh_mm_ss hms(start - day);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()));
    std::string key = buf;
    if (p % 1000 != 0) {
        std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(hms.subseconds().count()));
        key += buf;
    }
    return key + "Z";
}

std::optional<job_record> job_runner::record(std::string_view job, std::string_view run_key) {
    validate_job(job);
    validate_run_key(run_key);
    auto& impl = *db_.impl_;
    impl.check_schema();
    auto row = impl.with_session([&](detail::session& s) { return s.job_read(job, run_key); });
    if (row.status.empty()) return std::nullopt;
    return to_record(row, job, run_key);
}

std::vector<job_record> job_runner::records(std::string_view job, std::size_t limit) {
    if (!job.empty()) validate_job(job);
    return list(job, !job.empty(), limit);
}

std::vector<job_record> job_runner::records_with_prefix(std::string_view job_prefix, std::size_t limit) {
    if (job_prefix.find('\0') != std::string_view::npos || !detail::valid_utf8(job_prefix))
        throw config_error("a job-name prefix is UTF-8 without NUL");
    if (job_prefix.size() > max_job_bytes) {
        // Longer than any job name, so it starts none (`sqlock status` passes
        // its key prefix, which may be up to 255 bytes): checked as a listing
        // is, with no rows.
        check_limit(limit);
        db_.impl_->check_schema();
        return {};
    }
    return list(job_prefix, false, limit);
}

std::vector<job_record> job_runner::list(std::string_view job, bool exact, std::size_t limit) {
    check_limit(limit);
    auto& impl = *db_.impl_;
    impl.check_schema();
    auto rows = impl.with_session([&](detail::session& s) { return s.job_list(job, exact, limit); });
    std::vector<job_record> out;
    out.reserve(rows.size());
    for (const auto& r : rows) out.push_back(to_record(r, {}, {}));
    return out;
}

job_outcome job_runner::run_body(std::string_view job, std::string_view run_key, const body_function& body) {
    const std::string key = lock_key(job, run_key);
    auto& impl = *db_.impl_;
    impl.check_schema();
    auto read = [&] { return impl.with_session([&](detail::session& s) { return s.job_read(job, run_key); }); };

    // A run that is settled needs no lease: succeeded, out of attempts, or
    // waiting out its backoff.
    auto settled = [&](const detail::job_row& row) -> std::optional<job_outcome> {
        job_outcome out;
        out.record = to_record(row, job, run_key);
        if (row.status == to_string(run_status::succeeded)) {
            out.status = job_status::already_done;
            return out;
        }
        if (row.status != to_string(run_status::failed)) return std::nullopt;
        out.status = job_status::failed;
        out.error = row.last_error;
        // A lost run (the lease lost during its body, or the body judged it
        // gone) is retried at once and is not a failed attempt
        // (docs/jobs.md): its row gives the attempt back (attempts - 1), so
        // only failed attempts use up max_attempts. Rows of versions before
        // that counted it, and are known by a retry time no later than their
        // finish (two clock readings, which could straddle a millisecond).
        const bool lost_run = row.retry_ms != 0 && row.retry_ms <= row.finished_ms;
        if (row.attempts >= options_.max_attempts && !lost_run) return out;
        if (row.retry_ms > row.now_ms) {
            out.retry_in = std::chrono::milliseconds(row.retry_ms - row.now_ms);
            return out;
        }
        return std::nullopt;
    };
    if (auto done = settled(read())) return *done;

    const lock_options lo{.mode = options_.mode,
                          .lease = options_.lease,
                          .note = options_.note,
                          .reentrant = false,
                          .cancel = options_.cancel};
    std::optional<lease> held;
    if (options_.wait > std::chrono::milliseconds::zero()) {
        try {
            held.emplace(db_.acquire(key, options_.wait, lo));
        } catch (const timeout_error&) {
        }
    } else {
        held = db_.try_acquire(key, lo);
    }
    if (!held) {
        job_outcome out;
        out.status = job_status::busy;
        out.record = to_record(read(), job, run_key);
        const auto info = db_.inspect(key);
        out.error = info.held ? "the run is held by " + (info.holder.empty() ? info.mode : info.holder) +
                                    " (token " + std::to_string(info.token) + ")"
                              : "the run was held a moment ago";
        return out;
    }
    const std::int64_t token = held->token();
    const std::string holder = detail::holder_description();
    auto lost_outcome = [&](std::string why) {
        job_outcome out;
        out.status = job_status::lost;
        out.error = std::move(why);
        try {
            out.record = to_record(read(), job, run_key);
        } catch (const sqlock::error&) {
            // The database may be the reason the lease was lost.
        }
        return out;
    };

    // Claim the run: in a transaction fenced by the lease, re-read the row
    // (another instance may have finished it meanwhile) and mark it running.
    std::optional<job_outcome> settled_meanwhile;
    int attempt = 0;
    std::string earlier_error;  // kept in the row when this attempt succeeds
    // The claim may commit and still end in a connection_error (its answer
    // lost, and the pool's one repeat failed too, or was not made): the row
    // then says this owner is running the body, which never started, and the
    // next caller, finding it "running" once the lease is gone, counts the
    // attempt as a dead holder's (with max_attempts 1: failed for good). So
    // the row is put back, best effort, before the error goes on.
    auto unclaim = [&] {
        try {
            impl.with_session([&](detail::session& s) {
                return s.fenced(key, token, [&](detail::ledger& l) {
                    const auto row = l.read(job, run_key);
                    if (!row || row->status != to_string(run_status::running) || row->owner != held->owner())
                        return false;
                    l.write({.job = job, .run_key = run_key, .status = to_string(run_status::failed),
                             .owner = row->owner, .holder = row->holder, .token = row->token,
                             .attempts = row->attempts - 1, .retry_in_ms = 0,
                             .last_error = "the claim's answer was lost; the job did not start"});
                    return true;
                });
            });
        } catch (const std::exception& e) {
            impl.log().warn("the claim of run '{}' may stand, its answer lost: {} (the next caller counts it as an "
                            "attempt)",
                            key, e.what());
        }
    };
    detail::fence_result claimed;
    try {
        claimed = impl.with_session([&](detail::session& s) {
            return s.fenced(key, token, [&](detail::ledger& l) {
                settled_meanwhile.reset();
                const auto row = l.read(job, run_key);
                if (row && row->status == to_string(run_status::running) && row->owner == held->owner()) {
                    // Our own claim: its COMMIT went through but its answer was
                    // lost (the connection died), and this is the retry. Owner
                    // ids are never reused, so no other attempt wrote this row.
                    attempt = row->attempts;
                    earlier_error = row->last_error;
                    return false;  // nothing to write
                }
                if (row) {
                    if ((settled_meanwhile = settled(*row))) return false;
                }
                const int previous = row ? row->attempts : 0;
                std::string error = row ? row->last_error : std::string();
                if (row && row->status == to_string(run_status::running)) {
                    // Its holder died or lost the lease: we could only take the
                    // lease once that one had expired.
                    error = "attempt " + std::to_string(previous) + " by " + row->holder + " (token " +
                            std::to_string(row->token) + ") did not finish: its holder stopped renewing the lease";
                    if (previous >= options_.max_attempts) {
                        l.write({.job = job, .run_key = run_key, .status = to_string(run_status::failed),
                                 .owner = row->owner, .holder = row->holder, .token = row->token, .attempts = previous,
                                 .last_error = storable(error, max_error_bytes)});
                        job_outcome out;
                        out.status = job_status::failed;
                        out.error = error;
                        settled_meanwhile = out;
                        return true;
                    }
                }
                attempt = previous + 1;
                earlier_error = storable(error, max_error_bytes);
                l.write({.job = job, .run_key = run_key, .status = to_string(run_status::running),
                         .owner = held->owner(), .holder = holder, .token = token, .attempts = attempt,
                         .starting = true, .last_error = earlier_error});
                return true;
            });
        });
        detail::fault(detail::fault_point::job_claimed);
    } catch (const connection_error&) {
        unclaim();
        throw;
    }
    if (!claimed.held) return lost_outcome(claimed.reason);
    if (settled_meanwhile) {
        try {
            held->release();
        } catch (const std::exception& e) {
            // The outcome is known (and, for a dead holder's run, committed):
            // a release that fails must not turn it into an exception.
            impl.log().warn("releasing the run '{}' failed: {} (the lease expires on its own)", key, e.what());
        }
        if (settled_meanwhile->record.job.empty()) settled_meanwhile->record = to_record(read(), job, run_key);
        return *settled_meanwhile;
    }

    std::string result, error;
    bool ok = false;
    bool body_lost = false;  // the body stopped because it judged the lease gone
    // A lease already lost (a claim answered after the lease's deadline, the
    // database's copy still live) must not start the body: another instance
    // may take the run over as soon as the database lets the lease go.
    const bool started = !held->lost();
    if (!started) error = "the lease was lost before the job started; it was not run";
    try {
        if (started) {
            result = body(job_context{job, run_key, token, attempt, held->stop_token(), *held});
            ok = true;
        }
    } catch (const lease_lost_error& e) {
        body_lost = true;
        error = e.what();
    } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "the job threw an exception with an empty message";
    } catch (...) {
        error = "the job threw an exception that is not a std::exception";
    }
    if (ok && (result.size() > max_result_bytes || !detail::valid_utf8(result) ||
               result.find('\0') != std::string::npos)) {
        ok = false;
        error = "the job's result is not storable: results are at most 64 KiB of UTF-8 without NUL (got " +
                std::to_string(result.size()) + " bytes)";
    }

    // Record the outcome, fenced: if the lease is gone, nothing is written.
    job_outcome out;
    out.executed = started;
    // An attempt whose body never started does not count, nor does a lost
    // one (below): the next attempt takes its number again.
    detail::job_write w{.job = job, .run_key = run_key, .owner = held->owner(), .holder = holder,
                        .token = token, .attempts = started ? attempt : attempt - 1};
    std::string stored_error;
    if (held->lost() || body_lost) {
        // Our deadline passed, though the database may not have given the
        // key away yet (or the body stopped, judging it gone, though a late
        // renewal kept it): the body may have stopped half-way, so this
        // attempt does not count as done. Retry at once.
        out.status = job_status::lost;
        out.error = !started ? error
                             : "the lease was lost during the run" + (error.empty() ? std::string() : ": " + error);
        stored_error = storable(out.error, max_error_bytes);
        w.status = to_string(run_status::failed);
        w.retry_in_ms = 0;
        w.attempts = attempt - 1;
    } else if (ok) {
        out.status = job_status::ran;
        w.status = to_string(run_status::succeeded);
        w.result = result;
        stored_error = earlier_error;
    } else {
        out.status = job_status::failed;
        out.error = error;
        stored_error = storable(error, max_error_bytes);
        w.status = to_string(run_status::failed);
        if (attempt < options_.max_attempts) {
            out.retry_in = backoff(options_, attempt);
            w.retry_in_ms = out.retry_in->count();
        }
    }
    w.last_error = stored_error;
    // The body has run: a database that cannot be reached now is retried
    // until the lease is gone, rather than thrown at a caller who would not
    // know whether the job ran. If it stays unreachable, the run stays
    // "running" in the ledger and the next caller retries it once the lease
    // has expired. Any other error (the database refusing the row) is tried
    // a few times only: retried until the lease is gone, it would never end,
    // as the watchdog keeps the lease while the database answers.
    detail::fence_result recorded;
    bool lease_gone = false;  // why recorded.held is false: the lease, not the database refusing the row
    int refused = 0;
    for (auto pause = std::chrono::milliseconds(50);; pause = std::min(pause * 2, std::chrono::milliseconds(1000))) {
        try {
            recorded = impl.with_session([&](detail::session& s) {
                return s.fenced(key, token, [&](detail::ledger& l) {
                    l.write(w);
                    return true;
                });
            });
            lease_gone = !recorded.held;
            break;
        } catch (const sqlock::error& e) {
            const bool unreachable = dynamic_cast<const connection_error*>(&e) || dynamic_cast<const timeout_error*>(&e);
            if (held->lost() || (!unreachable && ++refused >= 3)) {
                lease_gone = held->lost();
                recorded = {false, std::string(held->lost() ? "the outcome could not be recorded before the lease "
                                                              "ran out: "
                                                            : "the database refused the outcome's record: ") +
                                       e.what()};
                break;
            }
            impl.log().warn("recording the run '{}' failed, retrying: {}", key, e.what());
            std::this_thread::sleep_for(pause);
        }
    }
    if (!recorded.held) {
        // A write whose COMMIT went through but whose answer was lost, and
        // whose retry then found the lease gone (expired, taken over, broken
        // by an operator), is recorded all the same: the ledger says so.
        std::optional<detail::job_row> row;
        try {
            row = read();
        } catch (const sqlock::error&) {
        }
        const bool ours = row && row->owner == w.owner && row->token == w.token && row->attempts == w.attempts &&
                          row->status == w.status && row->finished_ms != 0;
        if (!ours) {
            // The lease went during the run (the database gave it up first):
            // a lost run, which the next caller retries at once without
            // counting it. Left "running", the run read as a dead holder's
            // attempt, and with max_attempts 1 it failed for good. Not when
            // the database refused the row while the lease held: that
            // attempt counts, or a run it always refuses would run for ever.
            if (lease_gone) {
                try {
                    impl.with_session([&](detail::session& s) {
                        return s.job_abandon(job, run_key, w.owner, token,
                                             storable("the lease was lost during the run: " + recorded.reason +
                                                          (error.empty() ? std::string() : " (" + error + ")"),
                                                      max_error_bytes));
                    });
                } catch (const sqlock::error& e) {
                    impl.log().warn("marking the run '{}' lost failed: {} (the next caller counts it as an attempt)",
                                    key, e.what());
                }
            }
            auto lost =
                lost_outcome(recorded.reason + (error.empty() ? std::string() : " (the job failed: " + error + ")"));
            lost.executed = true;
            return lost;
        }
        impl.log().warn("the outcome of run '{}' was recorded, though its lease is gone now: {}", key, recorded.reason);
    }
    try {
        held->release();
    } catch (const std::exception& e) {
        impl.log().warn("releasing the run '{}' failed: {} (the lease expires on its own)", key, e.what());
    }
    try {
        out.record = to_record(read(), job, run_key);
    } catch (const sqlock::error& e) {
        impl.log().warn("reading back the run '{}' failed: {}", key, e.what());
    }
    return out;
}

}  // namespace sqlock
