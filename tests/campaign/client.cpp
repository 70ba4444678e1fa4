// One workload process of a campaign cell (`sqlock_campaign client`).
//
// Role "lock": loops on the hot keys: acquire (waiting; fair or not, at
// random), a fenced write to the ledger, a hold (mostly short, sometimes half
// a lease, sometimes 2.5 leases while the watchdog renews), a second fenced
// write, release. Role "job": runs one job through sqlock::job_runner for the
// current period's run key and catches up on the last few, the body writing a
// fenced effect row. Role "rw": loops on rw_key, taking it shared (60%) or
// exclusively, an act (see ledger::act), a hold, a second act, release. Role
// "sem": the same with a permit of `semaphore` (N = permits). All log every
// step (see campaign.hpp); on SIGTERM they finish the step at hand, release,
// and exit 0.

#include "campaign/client.hpp"

#include "campaign/campaign.hpp"
#include "campaign/ledger.hpp"
#include "dialects/common/fault.hpp"

#include <sqlock/sqlock.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <thread>

using namespace std::chrono_literals;
using nlohmann::json;

namespace campaign {
namespace {

class worker {
public:
    worker(const client_config& c, std::stop_token stop)
        : config_(c), stop_(stop), log_(c.log), board_(c.board, false), slot_(board_.at(c.slot)),
          rng_(static_cast<std::mt19937::result_type>(c.seed)), ledger_(c.url, c.prefix, c.id, c.unfenced, log_) {}

    int run() {
        slot_.pid = static_cast<std::int32_t>(::getpid());
        set(board::idle, -1);
        log_.write({{"ev", "start"}, {"c", config_.id}, {"pid", ::getpid()}, {"role", config_.role},
                    {"uid", ::getuid()}, {"unfenced", config_.unfenced}, {"broken_clock", config_.broken_clock},
                    {"relaxed", config_.relaxed}});
        std::optional<sqlock::client> db;
        while (!db && !stop_.stop_requested()) {
            try {
                db.emplace(sqlock::client::open(config_.url, options()));
            } catch (const std::exception& e) {
                log_.write({{"ev", "open_fail"}, {"err", e.what()}});
                std::this_thread::sleep_for(200ms);
            }
        }
        if (db) {
            if (config_.role == "job") jobs(*db);
            else if (config_.role == "rw" || config_.role == "sem") holders(*db);
            else locks(*db);
        }
        set(board::idle, -1);
        log_.write({{"ev", "exit"}});
        return 0;
    }

private:
    sqlock::client_options options() const {
        sqlock::client_options o;
        o.table_prefix = config_.prefix;
        o.connect_timeout = 2s;
        o.statement_timeout = 3s;
        o.sweep = true;
        o.sweep_interval = std::chrono::milliseconds(config_.sweep_ms);
        if (config_.relaxed) o.durability = sqlock::durability::relaxed;
        return o;
    }

    void set(board::state s, int key) {
        slot_.acted = 0;
        slot_.key = key;
        slot_.state = s;
    }

    sqlock::mode pick_mode(bool row_locks) {
        if (config_.mode == "unique_insert") return sqlock::mode::unique_insert;
        if (config_.mode == "conditional_update") return sqlock::mode::conditional_update;
        if (config_.mode == "select_for_update") return sqlock::mode::select_for_update;
        const auto n = row_locks ? 3u : 2u;  // "mixed"
        return static_cast<sqlock::mode>(rng_() % n);
    }

    std::chrono::milliseconds lease() const { return std::chrono::milliseconds(config_.lease_ms); }

    void sleep_for(std::chrono::milliseconds d) {
        const auto until = std::chrono::steady_clock::now() + d;
        while (!stop_.stop_requested() && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                20ms, until - std::chrono::steady_clock::now()));
    }

    // Mostly short; a quarter of the time half a lease; one in twenty 2.5
    // leases, so that renewals (and faults during them) matter.
    std::chrono::milliseconds hold_time() {
        const auto r = rng_() % 100;
        if (r < 70) return std::chrono::milliseconds(rng_() % 20);
        if (r < 95) return lease() / 2;
        return lease() * 5 / 2;
    }

    void locks(sqlock::client& db) {
        const bool row_locks = db.capabilities().row_locks;
        while (!stop_.stop_requested()) {
            const int ki = static_cast<int>(rng_() % static_cast<unsigned>(config_.keys));
            const std::string key = hot_key(ki);
            const auto mode = pick_mode(row_locks);
            const bool fair = rng_() % 2 == 0;
            set(board::waiting, ki);
            const auto m0 = mono_ns(), rt0 = real_ns();
            sqlock::lock_options o;
            o.mode = mode;
            o.lease = lease();
            o.fair = fair;
            o.cancel = stop_;
            o.on_lost = [this](const std::string& k, std::int64_t token) {
                log_.write({{"ev", "lost"}, {"k", k}, {"tok", token}});
            };
            std::optional<sqlock::lease> held;
            try {
                held.emplace(db.acquire(key, lease() * 4, o));
            } catch (const sqlock::cancelled_error&) {
                break;
            } catch (const std::exception& e) {
                log_.write({{"ev", "acq_fail"}, {"k", key}, {"err", e.what()}, {"m0", m0}, {"rt0", rt0}});
                set(board::idle, -1);
                sleep_for(50ms);
                continue;
            }
            log_.write({{"ev", "grant"}, {"k", key}, {"tok", held->token()}, {"own", held->owner()},
                        {"mode", sqlock::to_string(mode)}, {"fair", fair}, {"m0", m0}, {"rt0", rt0}});
            set(board::holding, ki);
            ledger_.fenced_write(*held, 1);
            sleep_for(hold_time());
            ledger_.fenced_write(*held, 2);
            set(board::idle, -1);
            release_logged(*held, {{"ev", "rel"}, {"k", key}, {"tok", held->token()}, {"m0", mono_ns()},
                                   {"rt0", real_ns()}});
        }
    }

    // Releases `held` and logs `e` with the outcome ("res": ok or err).
    void release_logged(sqlock::lease& held, json e) {
        try {
            held.release();
            e["res"] = "ok";
        } catch (const std::exception& x) {
            e["res"] = "err";
            e["err"] = x.what();
        }
        log_.write(std::move(e));
    }

    // Holds of readers and permits are longer than the lock role's: readers
    // must overlap each other and N permits be live together for the checks
    // (g) and (h) to see anything. One in twenty holds 2.5 leases.
    std::chrono::milliseconds holder_hold_time() {
        const auto r = rng_() % 100;
        if (r < 40) return std::chrono::milliseconds(rng_() % 50);
        if (r < 95) return std::chrono::milliseconds(config_.lease_ms / 10 + rng_() % (config_.lease_ms * 2 / 5));
        return lease() * 5 / 2;
    }

    void holders(sqlock::client& db) {
        const bool sem = config_.role == "sem";
        const bool row_locks = db.capabilities().row_locks;
        while (!stop_.stop_requested()) {
            const bool shared = !sem && rng_() % 100 < 60;
            const char* kind = sem ? "permit" : shared ? "shared" : "exclusive";
            // Shared holders and permits are leases (select_for_update is refused for them).
            auto mode = pick_mode(row_locks && !sem && !shared);
            if (mode == sqlock::mode::select_for_update && (sem || shared)) mode = sqlock::mode::conditional_update;
            const bool fair = rng_() % 2 == 0;
            const std::string key = sem ? semaphore : rw_key;
            slot_.writer = !sem && !shared;
            set(board::waiting, -1);
            const auto m0 = mono_ns(), rt0 = real_ns();
            sqlock::lock_options o;
            o.mode = mode;
            o.lease = lease();
            o.fair = fair;
            o.cancel = stop_;
            o.on_lost = [this, kind](const std::string& k, std::int64_t token) {
                log_.write({{"ev", "hlost"}, {"k", k}, {"kind", kind}, {"tok", token}});
            };
            std::optional<sqlock::lease> held;
            try {
                if (sem) held.emplace(db.acquire_permit(key, config_.permits, lease() * 4, o));
                else if (shared) held.emplace(db.acquire_shared(key, lease() * 4, o));
                else held.emplace(db.acquire(key, lease() * 4, o));
            } catch (const sqlock::cancelled_error&) {
                break;
            } catch (const std::exception& e) {
                log_.write(
                    {{"ev", "hacq_fail"}, {"k", key}, {"kind", kind}, {"err", e.what()}, {"m0", m0}, {"rt0", rt0}});
                set(board::idle, -1);
                sleep_for(50ms);
                continue;
            }
            log_.write({{"ev", "hgrant"}, {"k", key}, {"kind", kind}, {"tok", held->token()}, {"own", held->owner()},
                        {"mode", sqlock::to_string(mode)}, {"fair", fair}, {"m0", m0}, {"rt0", rt0}});
            set(board::holding, -1);
            ledger_.act(*held);
            slot_.acted = 1;
            sleep_for(holder_hold_time());
            ledger_.act(*held);
            set(board::idle, -1);
            release_logged(*held, {{"ev", "hrel"}, {"k", key}, {"kind", kind}, {"tok", held->token()},
                                   {"own", held->owner()}, {"m0", mono_ns()}, {"rt0", real_ns()}});
        }
    }

    void jobs(sqlock::client& db) {
        sqlock::job_options jo;
        jo.mode = config_.mode == "mixed" ? sqlock::mode::conditional_update : pick_mode(true);
        jo.lease = lease();
        jo.max_attempts = 50;
        jo.retry_backoff = 100ms;
        jo.max_backoff = 500ms;
        sqlock::job_runner runner(db, jo);
        const std::string job = "j0";
        std::deque<std::string> recent;  // run keys of the last periods, oldest first
        std::set<std::string> settled;
        while (!stop_.stop_requested()) {
            try {
                auto rk = runner.run_key(sqlock::every{std::chrono::milliseconds(config_.job_period_ms)});
                if (recent.empty() || recent.back() != rk) recent.push_back(rk);
                while (recent.size() > 4) recent.pop_front();
            } catch (const std::exception& e) {
                log_.write({{"ev", "job_fail"}, {"err", e.what()}});
                sleep_for(100ms);
                continue;
            }
            for (const auto& rk : recent) {
                if (settled.count(rk) || stop_.stop_requested()) continue;
                set(board::running_job, -1);
                try {
                    auto out = runner.run(job, rk, [&](const sqlock::job_context& c) {
                        log_.write({{"ev", "job_body"}, {"job", c.job}, {"rk", c.run_key}, {"tok", c.token},
                                    {"attempt", c.attempt}, {"own", c.lease.owner()}});
                        sleep_for(std::chrono::milliseconds(rng_() % static_cast<unsigned>(config_.lease_ms)));
                        // No effect, no success: the run is retried.
                        if (!ledger_.effect(c)) throw std::runtime_error("the effect was not written");
                        c.lease.check();  // a run whose lease is gone must not claim success
                        return std::to_string(c.token);
                    });
                    log_.write({{"ev", "job_out"}, {"job", job}, {"rk", rk}, {"status", sqlock::to_string(out.status)},
                                {"executed", out.executed}, {"tok", out.record.token}, {"err", out.error}});
                    if (out.status == sqlock::job_status::ran || out.status == sqlock::job_status::already_done)
                        settled.insert(rk);
                } catch (const std::exception& e) {
                    log_.write({{"ev", "job_fail"}, {"job", job}, {"rk", rk}, {"err", e.what()}});
                }
                set(board::idle, -1);
            }
            sleep_for(std::chrono::milliseconds(50 + rng_() % 50));
        }
    }

    const client_config& config_;
    std::stop_token stop_;
    event_log log_;
    board board_;
    board::slot& slot_;
    std::mt19937 rng_;
    ledger ledger_;
};

}  // namespace

int run_client(const client_config& config) {
    if (config.broken_clock) sqlock::detail::use_client_clock_for_testing();
    // SIGTERM asks for a clean stop: blocked in every thread (the library's
    // start after this), taken by sigwait on a thread of its own, which
    // requests the stop that acquire() and the loops watch. SIGUSR1 makes
    // that thread burn CPU for two leases: with the orchestrator's CPU quota
    // on the process, the way a busy application in a CPU-limited container
    // starves its own lock's timers.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::stop_source stop;
    const auto burn = std::chrono::milliseconds(config.lease_ms * 2);
    std::jthread signals([&stop, set, burn] {
        for (int sig = 0; sigwait(&set, &sig) == 0 && sig == SIGUSR1;) {
            const auto until = std::chrono::steady_clock::now() + burn;
            std::atomic<unsigned long> spin{0};
            while (std::chrono::steady_clock::now() < until) spin.fetch_add(1, std::memory_order_relaxed);
        }
        stop.request_stop();
    });
    worker w(config, stop.get_token());
    const int rc = w.run();
    // The signal thread waits in sigwait: wake it with the signal it waits for.
    if (!stop.stop_requested()) ::kill(::getpid(), SIGTERM);
    return rc;
}

}  // namespace campaign
