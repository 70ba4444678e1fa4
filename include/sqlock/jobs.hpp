#pragma once
// sqlock::job_runner: run a job once per run key across every instance of an
// application, with a ledger of runs in the database.

#include <sqlock/client.hpp>
#include <sqlock/lease.hpp>
#include <sqlock/options.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sqlock {

// A period for run keys taken from the database clock. With every{1h} the run
// key is the UTC start of the current hour, "2026-11-21T14:00:00Z" (with
// milliseconds, "…:00.250Z", when the period is not whole seconds). Periods
// are aligned to the Unix epoch, so days start at 00:00 UTC. A period longer
// than the client's job_retention (when not zero) is a config_error: the
// sweeper would delete the period's row before the period ends.
struct every {
    std::chrono::milliseconds period;
};

enum class job_status {
    ran,           // this call ran the job and recorded its success
    already_done,  // a run with this key succeeded before; the record says who, when, and its result
    busy,          // another instance holds the run right now; nothing ran
    failed,        // the run failed (in this call or before); error, attempts and retry_in say more
    lost,          // the lease was lost during the run; nothing was recorded as done
};

// "ran", "already_done", "busy", "failed" or "lost".
const char* to_string(job_status s) noexcept;

// Where a run stands in the ledger.
enum class run_status {
    running,    // claimed: its holder is at work, or died (retried once its lease has expired)
    succeeded,  // done; later calls for its run key report already_done
    failed,     // retried after a backoff, unless max_attempts are used up
};

// "running", "succeeded" or "failed": the word the ledger stores.
const char* to_string(run_status s) noexcept;

// A row of the job ledger. Times are by the database clock.
struct job_record {
    std::string job, run_key;  // empty job: no row
    run_status status = run_status::running;
    std::string owner;   // lease owner id of the latest attempt
    std::string holder;  // host:pid:thread of the latest attempt
    std::int64_t token = 0;  // fencing token of the latest attempt
    int attempts = 0;        // attempts that count so far (not those lost, nor a running one's lost predecessor)
    std::optional<std::chrono::sys_time<std::chrono::milliseconds>> started_at, finished_at, retry_at;
    std::string result;      // what the job returned, when it succeeded
    std::string last_error;  // the latest failure, if any
};

struct job_outcome {
    job_status status = job_status::busy;
    bool executed = false;  // this call ran the job body
    job_record record;      // the run's ledger row as this call left it (empty job: no row)
    std::string error;      // failed, lost, busy: what happened, in words
    // failed: how long until a later call retries the run (zero: at once);
    // empty when the attempts are used up and the run stays failed.
    std::optional<std::chrono::milliseconds> retry_in;
};

// What a job body receives.
struct job_context {
    std::string_view job;
    std::string_view run_key;
    std::int64_t token;     // the run's fencing token: pass it on, or fence writes with `lease`
    int attempt;            // 1 for the first attempt of this run key; a lost attempt's number is used again
    std::stop_token stop;   // requested when the lease is lost: stop work then
    const sqlock::lease& lease;  // for sqlock::postgres::fence and friends
};

struct job_options {
    sqlock::mode mode = mode::conditional_update;
    // Lease on the run, renewed by the watchdog while the body runs.
    std::chrono::milliseconds lease{std::chrono::seconds(30)};
    // How long run() waits for a run another instance holds (zero: report busy at once).
    std::chrono::milliseconds wait{0};
    // Attempts per run key, counting runs whose holder died. At least 1.
    int max_attempts = 3;
    // After attempt n fails, the run may be retried after
    // retry_backoff * 2^(n-1), at most max_backoff.
    std::chrono::milliseconds retry_backoff{std::chrono::seconds(1)};
    std::chrono::milliseconds max_backoff{std::chrono::minutes(5)};
    // Free text stored beside the run's lock.
    std::string note;
    // A wait for a busy run (see `wait`) ends, throwing cancelled_error, once
    // stop is requested.
    std::stop_token cancel;
};

// Runs jobs at most once per (job, run key) across every process that shares
// the database. A run's lock key is "job:<job>:<run key>". Success is written
// to the ledger in a transaction that first fences the run's lease, so a run
// whose lease was lost can never be marked done. Safe for concurrent use from
// many threads.
class job_runner {
public:
    explicit job_runner(client db, job_options options = {});

    // Runs body for run_key unless that run already succeeded, is held by
    // another instance, or failed and may not be retried yet. body takes a
    // const job_context& and returns a string (stored as the result) or
    // nothing; an exception it throws is recorded as the run's failure, but a
    // lease_lost_error (the body stopped because it judged the lease gone)
    // is a lost run, retried at once like one whose lease was lost.
    // Job names are 1 to 100 bytes of UTF-8 without ':' or control characters; run keys 1 to 128
    // bytes of UTF-8 without NUL; results at most 64 KiB of UTF-8. Throws
    // config_error for bad input, connection_error / db_error / schema_error
    // when the database fails before the body ran. Once the body has run,
    // recording its outcome is retried until the lease runs out; then the
    // outcome is lost.
    template <class F>
    [[nodiscard]] job_outcome run(std::string_view job, std::string_view run_key, F&& body);
    // The same, with the run key of the current period (see every).
    template <class F>
    [[nodiscard]] job_outcome run(std::string_view job, every period, F&& body);

    // The run key of the current period, by the database clock.
    std::string run_key(every period);
    // The ledger row of one run, if there is one.
    std::optional<job_record> record(std::string_view job, std::string_view run_key);
    // Ledger rows, newest first: of one job, or of every job when job is empty.
    std::vector<job_record> records(std::string_view job = {}, std::size_t limit = 100);
    // Ledger rows, newest first, of every job whose name starts with job_prefix
    // (filtered by the database, so the limit counts matching rows only); none
    // for a prefix longer than a job name may be (100 bytes).
    std::vector<job_record> records_with_prefix(std::string_view job_prefix, std::size_t limit = 100);

    // The lock key that guards a run: "job:<job>:<run key>".
    static std::string lock_key(std::string_view job, std::string_view run_key);

private:
    using body_function = std::function<std::string(const job_context&)>;
    std::vector<job_record> list(std::string_view job, bool exact, std::size_t limit);
    job_outcome run_body(std::string_view job, std::string_view run_key, const body_function& body);

    client db_;
    job_options options_;
};

template <class F>
job_outcome job_runner::run(std::string_view job, std::string_view run_key, F&& body) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, const job_context&>>) {
        return run_body(job, run_key, [&body](const job_context& c) {
            body(c);
            return std::string();
        });
    } else {
        return run_body(job, run_key, [&body](const job_context& c) { return std::string(body(c)); });
    }
}

template <class F>
job_outcome job_runner::run(std::string_view job, every period, F&& body) {
    return run(job, run_key(period), std::forward<F>(body));
}

}  // namespace sqlock
