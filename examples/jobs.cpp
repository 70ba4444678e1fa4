// Run a job once across a fleet: sqlock_example_jobs [URL]
// (default sqlite:jobs-example.db). Start it in several terminals at once:
// each run key runs in exactly one of them; the others report it as busy or
// already done.
#include <sqlock/sqlock.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

void print(const sqlock::job_outcome& out) {
    const auto& r = out.record;
    std::printf("%-40s %-12s attempts=%d token=%lld holder=%s%s%s\n", (r.job + " " + r.run_key).c_str(),
                sqlock::to_string(out.status), r.attempts, static_cast<long long>(r.token), r.holder.c_str(),
                out.error.empty() ? "" : " error=", out.error.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    const std::string url = argc > 1 ? argv[1] : "sqlite:jobs-example.db";
    auto db = sqlock::client::open(url);
    db.migrate();

    // At most one successful run per hour (UTC, by the database clock), with
    // up to three attempts; the lease is renewed while the body runs.
    sqlock::job_runner runner(db, {.lease = 30s, .max_attempts = 3, .retry_backoff = 10s});
    auto hourly = runner.run("reports/hourly", sqlock::every{1h}, [](const sqlock::job_context& c) {
        std::printf("building the report for %s (attempt %d, token %lld)\n", std::string(c.run_key).c_str(),
                    c.attempt, static_cast<long long>(c.token));
        for (int step = 0; step < 5; ++step) {
            if (c.stop.stop_requested()) throw std::runtime_error("lease lost: stopping half-way");
            std::this_thread::sleep_for(100ms);
        }
        return std::string("report ready");  // stored in the ledger
    });
    print(hourly);

    // An explicit run key: handle order 1001 once, however many instances see it.
    auto order = runner.run("orders/confirm", "order-1001", [](const sqlock::job_context&) {
        return std::string("confirmation sent");
    });
    print(order);

    // A job that fails is retried by a later call, after its backoff.
    auto flaky = runner.run("partners/sync", "2026-11-21", [](const sqlock::job_context& c) -> std::string {
        if (c.attempt == 1) throw std::runtime_error("partner API timed out");
        return "synced";
    });
    print(flaky);

    std::printf("\nledger:\n");
    for (const auto& r : runner.records())
        std::printf("  %-16s %-22s %-10s attempts=%d result=%s last_error=%s\n", r.job.c_str(), r.run_key.c_str(),
                    sqlock::to_string(r.status), r.attempts, r.result.c_str(), r.last_error.c_str());
    return 0;
}
