// `sqlock run`: plan (every check before a connection), then hold KEY (a
// lease, a shared hold or a permit), KEY and the --also keys, or a run of the
// job ledger while PROGRAM runs, and turn every outcome into one exit status.

#include "cli/child.hpp"
#include "cli/command.hpp"
#include "cli/duration.hpp"
#include "cli/output.hpp"

#include <sqlock/sqlock.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sqlock::cli {
namespace {

mode parse_mode(const std::string& m) {
    if (m == "insert") return mode::unique_insert;
    if (m == "update") return mode::conditional_update;
    if (m == "select-for-update") return mode::select_for_update;
    usage("--mode: '" + m + "' is not a mode; use insert, update or select-for-update");
}

// KEY and every --also key: the set `run --also` holds.
std::vector<std::string> run_keys(const settings& s) {
    std::vector<std::string> keys{s.key};
    keys.insert(keys.end(), s.also.begin(), s.also.end());
    return keys;
}

}  // namespace

run_plan plan_run(const settings& s) {
    if (!s.saw_separator) usage("run needs '--' before PROGRAM: sqlock run [OPTIONS] KEY -- PROGRAM [ARGS...]");
    if (s.program.empty()) usage("run: missing PROGRAM after '--'");
    if (!s.once_per.empty() && !s.run_key.empty()) usage("use --once-per or --run-key, not both");
    if (s.conflict_exit_code < 0 || s.conflict_exit_code > 255) usage("--conflict-exit-code must be 0 to 255");
    run_plan plan{.lease_mode = parse_mode(s.mode),
                  .lease = duration_option("--lease", s.lease),
                  .wait = duration_option("--wait", s.wait),
                  .kill_after = s.kill_after_given ? duration_option("--kill-after", s.kill_after)
                                                   : std::chrono::milliseconds(0),
                  .ledger = !s.once_per.empty() || !s.run_key.empty()};
    if (plan.lease.count() <= 0) usage("--lease must be longer than zero");
    // The guardian's SIGTERM comes at the lease's local deadline, a safety
    // margin (a tenth of the lease) before its expiry in the database: a
    // SIGKILL half the margin later ends even a PROGRAM that ignores SIGTERM
    // before the key can be granted to anyone else.
    if (!s.kill_after_given) plan.kill_after = plan.lease / 20;
    // The library's own bounds, checked here too: exit 64 even when the
    // database is away, before an SQLite file is created.
    if (plan.lease > max_duration)
        usage("--lease must be at most sqlock::max_duration, 24 days (" + s.lease + " given)");
    if (!s.once_per.empty()) {
        plan.period = duration_option("--once-per", s.once_per);
        if (plan.period->count() <= 0) usage("--once-per must be longer than zero");
    }
    if (s.shared && s.permits != 0) usage("use --shared or --permits, not both");
    if ((s.shared || s.permits != 0) && plan.ledger)
        usage("--shared and --permits cannot be combined with --once-per or --run-key");
    if (s.permits < 0 || (s.permits == 0 && s.permits_given)) usage("--permits must be at least 1");
    if (!s.also.empty()) {
        if (s.shared || s.permits != 0 || plan.ledger)
            usage("--also cannot be combined with --shared, --permits, --once-per or --run-key");
        if (plan.lease_mode == mode::select_for_update)
            usage("--also holds every key with a lease: use --mode update or insert, not select-for-update");
    }
    if (plan.ledger) {
        if (s.fair || s.priority != 0) usage("--fair and --priority cannot be combined with --once-per or --run-key");
        if (s.max_attempts < 1 || s.max_attempts > 1000) usage("--max-attempts must be 1 to 1000");
        // KEY names the job; a period's run key is known only from the database clock.
        job_runner::lock_key(s.key, s.run_key.empty() ? "period" : s.run_key);
    } else if (!s.also.empty()) {
        client::check_keys(run_keys(s));  // count, duplicates, each key: exit 64 before any SQL
    } else {
        client::check_key(s.key);
    }
    return plan;
}

namespace {

void check_not_interrupted(const signal_relay& relay) {
    if (relay.interrupted().stop_requested()) throw cancelled_error("interrupted before PROGRAM started");
}

// Runs PROGRAM while `held` (a lease or a multi_lease) holds, then releases
// it; a loss while PROGRAM ran is exit 70. lost_what() names what was lost;
// `name` what could not be released.
template <class Held>
int run_held(Held& held, const held_by& watch, const std::vector<std::string>& env,
             const std::function<std::string()>& lost_what, const std::string& name, const settings& s,
             const run_plan& plan, signal_relay& relay) {
    check_not_interrupted(relay);
    auto result = run_child(s.program, env, watch, plan.lease, plan.kill_after, relay);
    // Also lost if sqlock was frozen while PROGRAM ran and finished: nobody
    // held the lease for it meanwhile.
    result.lost = result.lost || held.lost();
    const std::string lost = result.lost ? lost_what() : std::string();
    try {
        held.release();
    } catch (const error& e) {
        // The lease ends by itself at its expiry; PROGRAM's status still counts.
        std::fprintf(stderr, "sqlock: could not release %s (it expires by itself): %s\n", terminal_text(name).c_str(),
                     terminal_text(e.what()).c_str());
    }
    if (result.lost)
        throw exit_with{exit_status::lease_lost, "lost the lease on " + lost + " while " + program_name(s) +
                                                     " ran; it was sent SIGTERM" +
                                                     (result.killed ? ", then SIGKILL after " +
                                                                          format_duration(plan.kill_after)
                                                                    : "")};
    return result.status;
}

int run_locked(client& db, const settings& s, const run_plan& plan, signal_relay& relay) {
    const lock_options options{
        .mode = plan.lease_mode, .lease = plan.lease, .fair = s.fair, .priority = s.priority, .cancel = relay.interrupted()};
    std::optional<lease> held = with_schema(db, [&]() -> std::optional<lease> {
        if (plan.wait.count() == 0) {
            if (s.shared) return db.try_acquire_shared(s.key, options);
            if (s.permits > 0) return db.try_acquire_permit(s.key, s.permits, options);
            return db.try_acquire(s.key, options);
        }
        try {
            if (s.shared) return db.acquire_shared(s.key, plan.wait, options);
            if (s.permits > 0) return db.acquire_permit(s.key, s.permits, plan.wait, options);
            return db.acquire(s.key, plan.wait, options);
        } catch (const timeout_error&) {
            return std::nullopt;
        }
    });
    if (!held && s.permits > 0)
        throw exit_with{s.conflict_exit_code,
                        "every permit of semaphore '" + s.key + "' is held" +
                            (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") + "; " +
                            program_name(s) + " not run"};
    if (!held && s.shared)
        throw exit_with{s.conflict_exit_code,
                        "'" + s.key + "' is held exclusively or a writer waits for it" +
                            (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") + "; " +
                            program_name(s) + " not run"};
    if (!held) {
        const auto info = db.inspect(s.key);
        throw exit_with{s.conflict_exit_code,
                        "'" + s.key + "' is held by " + describe_holder(info) +
                            (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") + "; " +
                            program_name(s) + " not run"};
    }
    return run_held(*held, held_by_lease(*held),
                    {"SQLOCK_KEY=" + held->key(), "SQLOCK_TOKEN=" + std::to_string(held->token()),
                     "SQLOCK_OWNER=" + held->owner()},
                    [&] { return "'" + s.key + "' (token " + std::to_string(held->token()) + ")"; }, "'" + s.key + "'",
                    s, plan, relay);
}

// run --also: KEY and the --also keys, all of them or none.
int run_set(client& db, const settings& s, const run_plan& plan, signal_relay& relay) {
    const lock_options options{
        .mode = plan.lease_mode, .lease = plan.lease, .fair = s.fair, .priority = s.priority, .cancel = relay.interrupted()};
    const auto keys = run_keys(s);
    std::optional<multi_lease> held = with_schema(db, [&]() -> std::optional<multi_lease> {
        if (plan.wait.count() == 0) return db.try_acquire_all(keys, options);
        try {
            return db.acquire_all(keys, plan.wait, options);
        } catch (const timeout_error&) {
            return std::nullopt;
        }
    });
    std::string all;
    for (const auto& k : keys) all += (all.empty() ? "'" : ", '") + k + "'";
    if (!held) {
        // The first key held now; none may be, when waiters were ahead or a holder just left.
        std::string busy = "one of " + all + " is busy";
        for (const auto& k : keys) {
            if (const auto info = db.inspect(k); info.held) {
                busy = "'" + k + "' (of " + all + ") is held by " + describe_holder(info);
                break;
            }
        }
        throw exit_with{s.conflict_exit_code, busy +
                                                  (plan.wait.count() ? " after waiting " + format_duration(plan.wait) : "") +
                                                  "; " + program_name(s) + " not run"};
    }
    std::vector<std::string> env{"SQLOCK_KEY=" + s.key, "SQLOCK_TOKEN=" + std::to_string(held->token(s.key)),
                                 "SQLOCK_OWNER=" + held->at(s.key).owner(),
                                 "SQLOCK_KEY_COUNT=" + std::to_string(held->keys().size())};
    for (std::size_t i = 0; i < held->keys().size(); ++i) {
        env.push_back("SQLOCK_KEY_" + std::to_string(i + 1) + "=" + held->keys()[i]);
        env.push_back("SQLOCK_TOKEN_" + std::to_string(i + 1) + "=" + std::to_string(held->tokens()[i]));
    }
    auto lost_key = [&] {
        for (const auto& l : held->leases())
            if (l.lost()) return "'" + l.key() + "' (token " + std::to_string(l.token()) + ") of " + all;
        return all;
    };
    return run_held(*held, held_by_set(*held), env, lost_key, all, s, plan, relay);
}

int run_job(client& db, const settings& s, const run_plan& plan, signal_relay& relay) {
    job_runner runner(db, {.mode = plan.lease_mode,
                           .lease = plan.lease,
                           .wait = plan.wait,
                           .max_attempts = s.max_attempts,
                           .cancel = relay.interrupted()});
    const std::string run_key =
        plan.period ? with_schema(db, [&] { return runner.run_key(every{*plan.period}); }) : s.run_key;

    std::optional<child_result> ran;
    std::exception_ptr not_started;  // PROGRAM could not be started: sqlock's failure, not PROGRAM's
    const auto outcome = with_schema(db, [&] {
        return runner.run(s.key, run_key, [&](const job_context& ctx) -> std::string {
            try {
                check_not_interrupted(relay);
                ran = run_child(s.program,
                                {"SQLOCK_KEY=" + ctx.lease.key(), "SQLOCK_TOKEN=" + std::to_string(ctx.token),
                                 "SQLOCK_OWNER=" + ctx.lease.owner(), "SQLOCK_JOB=" + s.key,
                                 "SQLOCK_RUN_KEY=" + std::string(ctx.run_key),
                                 "SQLOCK_ATTEMPT=" + std::to_string(ctx.attempt)},
                                held_by_lease(ctx.lease), plan.lease, plan.kill_after, relay);
            } catch (...) {
                not_started = std::current_exception();
                throw;  // recorded in the ledger as this attempt's failure
            }
            // Stopped at the lease's deadline, though a late renewal may have
            // kept the lease: PROGRAM may have stopped half-way, whatever
            // its status, so the run is lost, not done (exit 70).
            if (ran->lost)
                throw lease_lost_error(program_name(s) + " was stopped at the lease's deadline (status " +
                                       std::to_string(ran->status) + ")");
            if (ran->status != 0)
                throw std::runtime_error(program_name(s) + " exited with status " + std::to_string(ran->status));
            return "exit 0";
        });
    });
    if (not_started && outcome.status != job_status::lost) std::rethrow_exception(not_started);
    const std::string what = "'" + s.key + "' for run key " + run_key;
    switch (outcome.status) {
    case job_status::ran:
        return 0;
    case job_status::already_done:
        throw exit_with{s.conflict_exit_code, what + " already ran (" + outcome.record.holder + ", token " +
                                                  std::to_string(outcome.record.token) + "); " + program_name(s) +
                                                  " not run"};
    case job_status::busy:
        throw exit_with{s.conflict_exit_code, what + " is running elsewhere: " + outcome.error + "; " +
                                                  program_name(s) + " not run"};
    case job_status::lost:
        throw exit_with{exit_status::lease_lost, "lost the lease on " + what + " while " + program_name(s) +
                                       " ran; it was stopped and the run is not recorded as done"};
    case job_status::failed:
        if (outcome.executed && ran) return ran->status;  // PROGRAM's own failure, recorded in the ledger
        throw exit_with{s.conflict_exit_code,
                        what + " failed before (attempt " + std::to_string(outcome.record.attempts) + " of " +
                            std::to_string(s.max_attempts) + ": " + outcome.record.last_error + "); " +
                            (outcome.retry_in ? "retry in " + format_duration(*outcome.retry_in)
                                              : std::string("no attempts left")) +
                            "; " + program_name(s) + " not run"};
    }
    return exit_status::failure;
}

}  // namespace

int command_run(const settings& s) {
    const run_plan plan = plan_run(s);
    // PROGRAM is looked up before the lock is taken: a typo is exit 126 or
    // 127 without waiting for a busy key, and for a ledger run without using
    // up one of --max-attempts (a PROGRAM not found was a failed attempt,
    // with --max-attempts 1 the run key's last).
    try {
        check_program(s.program.at(0));
    } catch (const spawn_error& e) {
        throw exit_with{e.status, e.what()};
    }
    signal_relay relay;  // before the client starts its threads, so they never see these signals
    auto db = open_client(s, spdlog::level::err, true);
    try {
        if (plan.ledger) return run_job(db, s, plan, relay);
        return s.also.empty() ? run_locked(db, s, plan, relay) : run_set(db, s, plan, relay);
    } catch (const cancelled_error&) {
        const int sig = relay.last_signal();
        const char* name = sig > 0 ? sigabbrev_np(sig) : nullptr;
        throw exit_with{exit_status::signal_base + sig, std::string("interrupted by SIG") + (name ? name : "?") + " while waiting for '" +
                                       s.key + "'; " + program_name(s) + " not run"};
    } catch (const spawn_error& e) {
        throw exit_with{e.status, e.what()};
    }
}

}  // namespace sqlock::cli
