// One campaign cell (`sqlock_campaign run`): start the workload, apply each
// fault `trials` times while it runs, stop it, sweep, and dump the tables the
// checker reads. Every fault applied is an "fault" event in orch.jsonl with
// its victim and its start and end times; the orchestrator's own job runs
// (the final catch-up) log there too, as client 0.
//
// Faults (one cell each in a full campaign):
//   kill_holder kill_waiter    SIGKILL a client holding a key / waiting (a
//                              new client takes its place)
//   stop_holder                SIGSTOP a holder for 1.5 leases, then SIGCONT
//   starve_holder              a holder burns CPU under a quota of 0.1 CPU for
//                              2 leases (a cgroup; else SCHED_IDLE + busy loops)
//   server_crash               SIGKILL-style stop of the server, start again
//   server_freeze              SIGSTOP of every server process for 1.5 leases
//   conn_kill                  every client connection killed server-side
//   partition_all_short/_long  nftables drops the server's port both ways for
//                              0.5 / 2 leases, for every client
//   partition_some_short/_long the same for the clients running as nobody
//   replies_lost               only the server's packets dropped, 2 leases
//   clock_skew                 every client under faketime, +1 h, -1 h or +0
//   clock_jump                 clients under faketime; each trial moves their
//                              wall clock by up to an hour, back and forth
//   sqlite_write_lock          another process holds SQLite's write lock for
//                              1.5 leases (odd trials) or 0.3 leases
//   sweep_storm                every client sweeps every 20 ms
//   force_release              an operator runs `sqlock release --force KEY`
//   none                       the workload alone

#include "campaign/run.hpp"

#include "campaign/campaign.hpp"
#include "campaign/ledger.hpp"
#include "support/backends.hpp"
#include "support/faketime.hpp"

#include <sqlock/sqlock.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace campaign {

const std::vector<std::string>& all_faults() {
    static const std::vector<std::string> faults{
        "none",          "kill_holder",         "kill_waiter",          "stop_holder",          "starve_holder",
        "server_crash",  "server_freeze",       "conn_kill",            "partition_all_short",  "partition_all_long",
        "partition_some_short", "partition_some_long", "replies_lost",  "clock_skew",           "clock_jump",
        "sqlite_write_lock",    "sweep_storm",  "force_release"};
    return faults;
}

bool fault_applies(const std::string& fault, const std::string& backend) {
    static const std::set<std::string> server_only{
        "server_crash",        "server_freeze",        "conn_kill",           "partition_all_short",
        "partition_all_long",  "partition_some_short", "partition_some_long", "replies_lost"};
    if (fault == "sqlite_write_lock") return backend == "sqlite";
    return backend != "sqlite" || !server_only.count(fault);
}

namespace {

constexpr int nobody = 65534;

void sleep_ms(std::int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Runs a shell command line; returns its exit status and its output.
std::pair<int, std::string> shell(const std::string& command) {
    std::string out;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return {-1, "popen failed"};
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

int port_of(const std::string& url) {
    // ...@host:PORT/db
    const auto at = url.rfind('@');
    const auto colon = url.find(':', at == std::string::npos ? url.find("//") + 2 : at);
    if (colon == std::string::npos) return 0;
    return std::atoi(url.c_str() + colon + 1);
}

bool writable(const std::string& path) { return ::access(path.c_str(), W_OK) == 0; }

// Starves one process of CPU for a while, the way a container's CPU limit
// does: a cgroup with a quota of 10 ms per 100 ms period (a limit of 0.1 CPU)
// when the cpu controller is writable (v2 or v1), else SCHED_IDLE for each of
// its threads plus one busy loop per CPU. The process is also told (SIGUSR1)
// to burn CPU itself, so the quota runs out and its threads wait for the next
// period, as a busy application's lock timers would.
class starvation {
    // One group per orchestrator: campaigns may run side by side.
    static std::string group_name() { return "sqlock_campaign_starve_" + std::to_string(::getpid()); }

public:
    starvation(pid_t pid, std::string& how) : pid_(pid) {
        if (writable("/sys/fs/cgroup/cgroup.subtree_control") && fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
            dir_ = "/sys/fs/cgroup/" + group_name();
            std::error_code ec;
            fs::create_directory(dir_, ec);
            if (put(dir_ + "/cpu.max", "10000 100000") && put(dir_ + "/cgroup.procs", std::to_string(pid))) {
                back_ = "/sys/fs/cgroup/cgroup.procs";
                how = "cgroup v2 cpu.max 10 ms per 100 ms";
                return;
            }
        }
        if (writable("/sys/fs/cgroup/cpu/cgroup.procs")) {
            dir_ = "/sys/fs/cgroup/cpu/" + group_name();
            std::error_code ec;
            fs::create_directory(dir_, ec);
            if (put(dir_ + "/cpu.cfs_period_us", "100000") && put(dir_ + "/cpu.cfs_quota_us", "10000") &&
                put(dir_ + "/cgroup.procs", std::to_string(pid))) {
                back_ = "/sys/fs/cgroup/cpu/cgroup.procs";
                how = "cgroup v1 cpu quota 10 ms per 100 ms";
                return;
            }
        }
        dir_.clear();
        for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
            sched_param p{};
            ::sched_setscheduler(std::atoi(t.path().filename().c_str()), SCHED_IDLE, &p);
        }
        for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i) {
            const pid_t busy = ::fork();
            if (busy == 0) {
                std::atomic<unsigned long> spin{0};
                for (;;) spin.fetch_add(1, std::memory_order_relaxed);
            }
            busy_.push_back(busy);
        }
        how = "SCHED_IDLE and busy loops";
    }
    ~starvation() {
        if (!dir_.empty()) {
            put(back_, std::to_string(pid_));
            ::rmdir(dir_.c_str());
        } else {
            for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid_) + "/task")) {
                sched_param p{};
                ::sched_setscheduler(std::atoi(t.path().filename().c_str()), SCHED_OTHER, &p);
            }
        }
        for (pid_t b : busy_) {
            ::kill(b, SIGKILL);
            ::waitpid(b, nullptr, 0);
        }
    }

private:
    static bool put(const std::string& file, const std::string& value) {
        std::ofstream out(file);
        out << value << std::flush;
        return static_cast<bool>(out);
    }
    pid_t pid_;
    std::string dir_, back_;
    std::vector<pid_t> busy_;
};

class cell {
public:
    explicit cell(const cell_config& c)
        : c_(c), backend_(backend_of(c.url)), rng_(static_cast<std::mt19937::result_type>(c.seed)) {
        fs::create_directories(c_.dir);
        // Clients running as nobody write their histories here too.
        ::chmod(c_.dir.c_str(), 0777);
        log_.emplace(c_.dir + "/orch.jsonl");
        board_.emplace(c_.dir + "/board", true);
        ::chmod((c_.dir + "/board").c_str(), 0666);
        root_ = ::geteuid() == 0;
        port_ = port_of(c_.url);
    }

    int run() {
        const auto start = mono_ns();
        json meta{{"backend", backend_}, {"mode", c_.mode}, {"faults", c_.faults}, {"trials", c_.trials},
                  {"lease_ms", c_.lease_ms}, {"keys", c_.keys}, {"lock_clients", c_.lock_clients},
                  {"job_clients", c_.job_clients}, {"rw_clients", c_.rw_clients}, {"sem_clients", c_.sem_clients},
                  {"permits", c_.permits}, {"control", c_.control}, {"prefix", c_.prefix},
                  {"m_start", start}, {"rt_start", real_ns()}};
        for (const auto& f : c_.faults) {
            if (!fault_applies(f, backend_)) throw std::runtime_error("fault " + f + " does not apply to " + backend_);
            if (f == "clock_skew") skew_ = true;
            if (f == "clock_jump") jump_ = true;
            if (f == "sweep_storm") storm_ = true;
        }
        prepare();
        const int slots = c_.lock_clients + c_.job_clients + c_.rw_clients + c_.sem_clients;
        for (int s = 0; s < slots; ++s) spawn(s);
        sleep_ms(1500);  // warm up: every client connected and contending
        json trials = json::array();
        for (const auto& f : c_.faults)
            for (int t = 1; t <= c_.trials; ++t) {
                json e = apply(f, t);
                e["ev"] = "fault";
                e["f"] = f;
                e["trial"] = t;
                log_->write(e);
                trials.push_back(e);
                reap();
                sleep_ms(c_.lease_ms + 1000);  // settle: liveness is measured from the heal
            }
        stop_all();
        heal_all();
        drain_jobs();
        sleep_ms(c_.lease_ms + 1000);  // dead waiters' tickets expire
        sweep_and_dump();
        meta["m_end"] = mono_ns();
        meta["seconds"] = static_cast<double>(mono_ns() - start) / 1e9;
        meta["clients_started"] = next_id_ - 1;
        meta["trials_applied"] = trials.size();
        std::ofstream(c_.dir + "/meta.json") << meta.dump(1) << "\n";
        return 0;
    }

private:
    struct proc {
        int id = 0;
        pid_t pid = 0;
        std::string role;
    };

    // sqlock's tables and the application's, fresh under the cell's prefix.
    void prepare() {
        sqlock::client_options o;
        o.table_prefix = c_.prefix;
        o.sweep = false;
        auto db = sqlock::client::open(c_.url, o);
        db.migrate();
        auto raw = test::raw_connection_for(c_.url, std::chrono::seconds(10));
        for (const auto& sql : dialect_sql{backend_}.create(tables{c_.prefix}, c_.keys)) raw->exec(sql);
        if (jump_) set_fake_offset("+0");
        if (partitions() && root_) {
            // Connections of clients running as nobody carry a conntrack
            // mark from their first packet, so "some clients" can be cut
            // in both directions; the cut itself goes into chain `cut`.
            nft("add table inet sqlock_campaign");
            nft("add chain inet sqlock_campaign out { type filter hook output priority 0 ; }");
            nft("add chain inet sqlock_campaign cut");
            nft("add rule inet sqlock_campaign out meta skuid " + std::to_string(nobody) + " tcp dport " +
                std::to_string(port_) + " ct mark set 0x1");
            nft("add rule inet sqlock_campaign out jump cut");
        }
    }

    bool partitions() const {
        return std::any_of(c_.faults.begin(), c_.faults.end(),
                           [](const std::string& f) { return f.starts_with("partition") || f == "replies_lost"; });
    }

    void nft(const std::string& args) {
        auto [rc, out] = shell("nft '" + args + "'");  // one argument: braces and ';' are nft's
        if (rc != 0) throw std::runtime_error("nft " + args + ": " + out);
    }

    void set_fake_offset(const std::string& offset) {
        const std::string file = c_.dir + "/faketime.rc", tmp = file + ".tmp";
        std::ofstream(tmp) << offset << "\n";
        ::chmod(tmp.c_str(), 0644);
        fs::rename(tmp, file);
    }

    // Slots in order: lock clients, job clients, readers-writers, permit takers.
    std::string role_of(int slot) const {
        if (slot < c_.lock_clients) return "lock";
        if (slot < c_.lock_clients + c_.job_clients) return "job";
        if (slot < c_.lock_clients + c_.job_clients + c_.rw_clients) return "rw";
        return "sem";
    }

    void spawn(int slot) {
        const int id = next_id_++;
        const std::string role = role_of(slot);
        const bool job = role == "job";
        // Half the lock, reader-writer and permit clients of a server backend
        // run as nobody: the "some clients" of a partial partition.
        const bool as_nobody = root_ && backend_ != "sqlite" && !job && slot % 2 == 1;
        std::vector<std::string> args{c_.self,
                                      "client",
                                      "--url=" + c_.url,
                                      "--prefix=" + c_.prefix,
                                      "--id=" + std::to_string(id),
                                      "--slot=" + std::to_string(slot),
                                      "--role=" + role,
                                      "--permits=" + std::to_string(c_.permits),
                                      "--mode=" + c_.mode,
                                      "--keys=" + std::to_string(c_.keys),
                                      "--lease-ms=" + std::to_string(c_.lease_ms),
                                      "--sweep-ms=" + std::to_string(storm_ ? 20 : 1000),
                                      "--job-period-ms=" + std::to_string(c_.lease_ms * 2),
                                      "--log=" + c_.dir + "/c" + std::to_string(id) + ".jsonl",
                                      "--board=" + c_.dir + "/board",
                                      "--seed=" + std::to_string(c_.seed * 1000 + static_cast<unsigned long>(id))};
        if (c_.control == "unfenced") args.push_back("--unfenced");
        if (c_.control == "broken-clock") args.push_back("--broken-clock");
        if (c_.control == "relaxed-durability") args.push_back("--relaxed");
        // Skew and jumps are the wall clock's faults: the kernel never steps
        // CLOCK_MONOTONIC or CLOCK_BOOTTIME, and faketime faking them would
        // break every timed wait in the process (the kernel waits on the
        // real clock), which no real machine does.
        std::vector<std::string> env;
        if (skew_ || jump_) env = test::faketime::preload();
        if (skew_) {
            // An hour ahead, an hour behind, or right: a mixture, so that
            // some clients' clocks are ahead of others'.
            static const char* const skews[] = {"FAKETIME=+1h", "FAKETIME=-1h", "FAKETIME=+0"};
            env.emplace_back(skews[id % 3]);
        } else if (jump_) {
            env.push_back("FAKETIME_TIMESTAMP_FILE=" + c_.dir + "/faketime.rc");
            env.emplace_back("FAKETIME_CACHE_DURATION=1");
        }
        const pid_t pid = ::fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid == 0) {
            ::setpgid(0, 0);
            for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
            if (as_nobody && (::setgid(nobody) != 0 || ::setuid(nobody) != 0)) ::_exit(125);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        procs_[slot] = {id, pid, role};
        log_->write({{"ev", "spawn"}, {"c", id}, {"pid", pid}, {"slot", slot}, {"nobody", as_nobody}, {"role", role}});
    }

    // Reaps client p once it has ended (block: waits for that); false when
    // it has not. A client under faketime that was killed leaves
    // libfaketime's objects named after its pid in /dev/shm (see
    // support/faketime.hpp): they go while it is a zombie, before its pid
    // can be another process's.
    bool reaped(proc& p, int& status, bool block) {
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(p.pid), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG)) != 0 ||
            info.si_pid != p.pid)
            return false;
        if ((skew_ || jump_) && info.si_code != CLD_EXITED) test::faketime::forget(p.pid);
        ::waitpid(p.pid, &status, 0);
        return true;
    }

    // Notices clients that died on their own (they should not), and replaces them.
    void reap() {
        for (auto& [slot, p] : procs_) {
            int status = 0;
            if (p.pid > 0 && reaped(p, status, false)) {
                log_->write({{"ev", "died"}, {"c", p.id}, {"pid", p.pid}, {"status", status}});
                p.pid = 0;
                spawn(slot);
            }
        }
    }

    // A client in state s (holding: also a job body at work), waiting up to 6 s for one.
    // Successive picks for a fault prefer, in turn, a lock client, a writer
    // of rw_key, a permit client, and a lock or job client, so that a
    // control of six trials, or the faults of a cell of one trial each,
    // hurt every kind of holder. A
    // writer: a stopped reader breaks nothing unless a writer comes in its
    // gap, a stopped writer whenever anyone does. Any client in state s will
    // do when none preferred is by 4 s (a writer that has acted holds about
    // a fifth of the time: by 1 s, half the writer turns of the controls of
    // 2026-11-27 had taken someone else).
    std::optional<int> pick(board::state s, const std::string& fault) {
        // Each fault takes its own turns, from a start of its own: in a short
        // run, with one trial of each, stop_holder then pauses a lock client
        // (a fenced writer) and kill_holder kills a writer of rw_key, where
        // one count shared by all faults gave stop_holder a permit holder and
        // never paused a lock holder outside the controls.
        static const std::map<std::string, std::size_t, std::less<>> first{
            {"stop_holder", 0}, {"kill_holder", 1}, {"starve_holder", 2}, {"kill_waiter", 3}};
        const auto start = first.find(fault);
        const auto turn = ((start == first.end() ? 0 : start->second) + picks_[fault]++) % 4;
        auto preferred = [&](const proc& p, const board::slot& b) {
            if (turn == 0) return p.role == "lock";
            // A holder of rw_key or a permit once it has acted (see board::slot::acted).
            const bool ready = s != board::holding || b.acted.load() == 1;
            if (turn == 1) return p.role == "rw" && b.writer.load() == 1 && ready;
            if (turn == 2) return p.role == "sem" && ready;
            return p.role == "lock" || p.role == "job";
        };
        for (int tries = 0; tries < 600; ++tries) {
            std::vector<int> found, best;
            for (const auto& [slot, p] : procs_) {
                const auto st = board_->at(slot).state.load();
                if (p.pid > 0 && (st == s || (s == board::holding && st == board::running_job))) {
                    found.push_back(slot);
                    if (preferred(p, board_->at(slot))) best.push_back(slot);
                }
            }
            if (!best.empty()) return best[rng_() % best.size()];
            if (!found.empty() && tries >= 400) return found[rng_() % found.size()];
            sleep_ms(10);
        }
        return std::nullopt;
    }

    json victim(int slot) {
        const auto& p = procs_[slot];
        return {{"c", p.id}, {"pid", p.pid}, {"role", p.role}, {"key", board_->at(slot).key.load()}};
    }

    void kill_and_replace(int slot) {
        auto& p = procs_[slot];
        ::kill(p.pid, SIGKILL);
        int status = 0;
        reaped(p, status, true);
        p.pid = 0;
        board_->at(slot).state = board::idle;  // not the dead one's state for its successor
        sleep_ms(200);
        spawn(slot);
    }

    json servers(const std::string& what) {
        const std::string server = backend_ == "postgres" ? "postgres" : "mysql";
        auto [rc, out] = shell("bash '" + c_.servers_script + "' " + what + " " + server + " '" + c_.server_dir + "'");
        if (rc != 0) throw std::runtime_error("test-servers.sh " + what + " failed: " + out);
        return {};
    }

    int kill_connections() {
        auto raw = test::raw_connection_for(c_.url, std::chrono::seconds(5));
        if (backend_ == "postgres")
            return static_cast<int>(raw->scalar(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"));
        int n = 0;
        for (const auto& row : raw->rows("SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND "
                                         "id <> CONNECTION_ID() AND command <> 'Daemon'")) {
            try {
                raw->exec("KILL CONNECTION " + row.at(0));
                ++n;
            } catch (const std::exception&) {
                // gone already
            }
        }
        return n;
    }

    json apply(const std::string& f, int trial) {
        json e;
        const int lease = c_.lease_ms;
        auto begin = [&] {
            e["m0"] = mono_ns();
            e["rt0"] = real_ns();
        };
        auto end = [&] {
            e["m1"] = mono_ns();
            e["rt1"] = real_ns();
        };
        // A client in state `s` to apply the fault to, recorded in the event;
        // none: the trial is skipped and says why.
        auto victim_in = [&](board::state s, const char* none) -> std::optional<int> {
            auto slot = pick(s, f);
            if (slot)
                e["victim"] = victim(*slot);
            else
                e["skipped"] = none;
            return slot;
        };
        if (f == "kill_holder" || f == "kill_waiter") {
            auto slot = victim_in(f == "kill_holder" ? board::holding : board::waiting, "no client in that state");
            if (!slot) return e;
            begin();
            ::kill(procs_[*slot].pid, SIGKILL);
            end();
            kill_and_replace(*slot);
        } else if (f == "stop_holder") {
            auto slot = victim_in(board::holding, "no holder");
            if (!slot) return e;
            begin();
            ::kill(procs_[*slot].pid, SIGSTOP);
            sleep_ms(lease * 3 / 2);
            ::kill(procs_[*slot].pid, SIGCONT);
            end();
        } else if (f == "starve_holder") {
            auto slot = victim_in(board::holding, "no holder");
            if (!slot) return e;
            std::string how;
            begin();
            {
                starvation s(procs_[*slot].pid, how);
                ::kill(procs_[*slot].pid, SIGUSR1);  // burns CPU for two leases
                sleep_ms(lease * 2);
            }
            end();
            e["how"] = how;
        } else if (f == "server_crash") {
            begin();
            servers("restart");
            end();
        } else if (f == "server_freeze") {
            begin();
            servers("freeze");
            sleep_ms(lease * 3 / 2);
            servers("thaw");
            end();
        } else if (f == "conn_kill") {
            begin();
            e["killed"] = kill_connections();
            end();
        } else if (f.starts_with("partition") || f == "replies_lost") {
            const std::string port = std::to_string(port_);
            begin();
            if (f == "replies_lost") {
                nft("add rule inet sqlock_campaign cut tcp sport " + port + " drop");
            } else if (f.starts_with("partition_all")) {
                nft("add rule inet sqlock_campaign cut tcp dport " + port + " drop");
                nft("add rule inet sqlock_campaign cut tcp sport " + port + " drop");
            } else {
                nft("add rule inet sqlock_campaign cut ct mark 0x1 drop");
            }
            sleep_ms(f.ends_with("_short") ? lease / 2 : lease * 2);
            nft("flush chain inet sqlock_campaign cut");
            end();
        } else if (f == "clock_jump") {
            static const char* const offsets[] = {"+1h", "-1h", "+10m", "-30m", "+0"};
            const std::string offset = offsets[(trial - 1) % 5];
            begin();
            set_fake_offset(offset);
            end();
            e["offset"] = offset;
            sleep_ms(lease);
        } else if (f == "sqlite_write_lock") {
            auto raw = test::raw_connection_for(c_.url, std::chrono::seconds(30));
            raw->begin();  // BEGIN IMMEDIATE: SQLite's write lock
            begin();
            sleep_ms(trial % 2 ? lease * 3 / 2 : lease * 3 / 10);
            raw->commit();
            end();
        } else if (f == "force_release") {
            const int key = static_cast<int>(rng_() % static_cast<unsigned>(c_.keys));
            e["k"] = hot_key(key);
            begin();
            auto [rc, out] = shell("'" + c_.cli + "' release --force '" + hot_key(key) + "' --url '" + c_.url +
                                   "' --table-prefix '" + c_.prefix + "'");
            end();
            e["rc"] = rc;
            e["out"] = out;
        } else {  // none, clock_skew, sweep_storm: the fault is the cell's setting; a trial is a stretch of time
            begin();
            sleep_ms(lease);
            end();
        }
        return e;
    }

    void stop_all() {
        for (auto& [slot, p] : procs_)
            if (p.pid > 0) ::kill(p.pid, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + 15s;
        for (auto& [slot, p] : procs_) {
            if (p.pid <= 0) continue;
            int status = 0;
            while (!reaped(p, status, false)) {
                if (std::chrono::steady_clock::now() > deadline) {
                    log_->write({{"ev", "stuck"}, {"c", p.id}, {"pid", p.pid}});
                    ::kill(p.pid, SIGKILL);
                    reaped(p, status, true);
                    break;
                }
                sleep_ms(20);
            }
            log_->write({{"ev", "stopped"}, {"c", p.id}, {"pid", p.pid}, {"status", status}});
            p.pid = 0;
        }
    }

    void heal_all() {
        if (partitions() && root_) shell("nft delete table inet sqlock_campaign");
        if (jump_) set_fake_offset("+0");
    }

    sqlock::client open_client() {
        sqlock::client_options o;
        o.table_prefix = c_.prefix;
        o.sweep = false;
        for (int attempt = 0;; ++attempt) {
            try {
                return sqlock::client::open(c_.url, o);
            } catch (const sqlock::connection_error&) {
                if (attempt > 50) throw;
                sleep_ms(200);
            }
        }
    }

    // The next instance: every run the clients left unfinished (its holder
    // died or the cell ended) is run again, and must now succeed.
    void drain_jobs() {
        if (c_.job_clients == 0) return;
        auto db = open_client();
        sqlock::job_options jo;
        jo.mode = c_.mode == "mixed" ? sqlock::mode::conditional_update
                  : c_.mode == "unique_insert" ? sqlock::mode::unique_insert
                  : c_.mode == "select_for_update" ? sqlock::mode::select_for_update
                                                  : sqlock::mode::conditional_update;
        jo.lease = std::chrono::milliseconds(c_.lease_ms);
        jo.wait = std::chrono::milliseconds(c_.lease_ms * 3);
        jo.max_attempts = 50;
        jo.retry_backoff = 0ms;
        sqlock::job_runner runner(db, jo);
        ledger app(c_.url, c_.prefix, 0, false, *log_);
        for (const auto& r : runner.records("j0", 100000)) {
            if (r.status == sqlock::run_status::succeeded) continue;
            for (int attempt = 0; attempt < 5; ++attempt) {
                auto out = runner.run(r.job, r.run_key, [&](const sqlock::job_context& c) {
                    log_->write({{"ev", "job_body"}, {"c", 0}, {"job", c.job}, {"rk", c.run_key}, {"tok", c.token},
                                 {"attempt", c.attempt}, {"own", c.lease.owner()}});
                    if (!app.effect(c)) throw std::runtime_error("the effect was not written");
                    c.lease.check();
                    return std::to_string(c.token);
                });
                log_->write({{"ev", "job_out"}, {"c", 0}, {"job", r.job}, {"rk", r.run_key},
                             {"status", sqlock::to_string(out.status)}, {"executed", out.executed},
                             {"tok", out.record.token}, {"err", out.error}});
                if (out.status == sqlock::job_status::ran || out.status == sqlock::job_status::already_done) break;
                sleep_ms(200);
            }
        }
    }

    void dump(const std::string& name, const std::vector<std::string>& columns,
              const std::vector<std::vector<std::string>>& rows) {
        std::ofstream out(c_.dir + "/" + name + ".jsonl");
        for (const auto& r : rows) {
            json j;
            for (std::size_t i = 0; i < columns.size() && i < r.size(); ++i) {
                const auto& col = columns[i];
                // Columns named n_* are numbers.
                if (col.starts_with("n_")) j[col.substr(2)] = r[i].empty() ? 0 : std::stoll(r[i]);
                else j[col] = r[i];
            }
            out << j.dump() << "\n";
        }
    }

    void sweep_and_dump() {
        auto db = open_client();
        std::size_t swept = 0;
        for (int i = 0; i < 20; ++i) {
            const auto n = db.sweep();
            swept += n;
            if (n == 0) break;
        }
        const tables t{c_.prefix};
        const dialect_sql sql{backend_};
        auto raw = test::raw_connection_for(c_.url, std::chrono::seconds(10));
        if (backend_ == "mysql") raw->exec("SET time_zone = '+00:00'");
        dump("counters", {"k", "n_counter"}, raw->rows("SELECT k, counter FROM " + t.counters() + " ORDER BY k"));
        dump("history", {"k", "n_seq", "n_tok", "own", "n_c", "n_wid", "n_g_ms", "n_w_ms"},
             raw->rows("SELECT k, seq, token, owner, client, wid, g_ms, w_ms FROM " + t.history() + " ORDER BY k, seq"));
        dump("fences", {"k", "n_tok"}, raw->rows("SELECT lock_key, token FROM " + t.fences() + " ORDER BY lock_key"));
        dump("locks", {"k", "own", "mode", "n_live"}, raw->rows(sql.lock_rows(t)));
        dump("waiters", {"k", "own", "holder"}, raw->rows(sql.waiter_rows(t)));
        dump("acts", {"k", "kind", "n_tok", "own", "n_c", "n_wid", "n_t_us"},
             raw->rows("SELECT k, kind, token, owner, client, wid, t_us FROM " + t.acts() + " ORDER BY t_us"));
        dump("holders", {"kind", "k", "own", "n_live"}, raw->rows(sql.holder_rows(t)));
        dump("effects", {"job", "rk", "n_tok", "own", "n_c", "n_attempt"},
             raw->rows("SELECT job, rk, token, owner, client, attempt FROM " + t.effects() + " ORDER BY job, rk"));
        std::ofstream jobs(c_.dir + "/jobs.jsonl");
        sqlock::job_runner runner(db);
        for (const auto& r : runner.records("j0", 100000))
            jobs << json{{"job", r.job},         {"rk", r.run_key},  {"status", sqlock::to_string(r.status)},
                         {"tok", r.token},       {"own", r.owner},   {"attempts", r.attempts},
                         {"result", r.result}}.dump()
                 << "\n";
        // Every hot key must be free for a newcomer now.
        std::ofstream free_keys(c_.dir + "/acquirable.jsonl");
        for (int i = 0; i < c_.keys; ++i) {
            sqlock::lock_options o;
            o.lease = 5s;
            auto l = db.try_acquire(hot_key(i), o);
            free_keys << json{{"k", hot_key(i)}, {"ok", l.has_value()}}.dump() << "\n";
        }
        if (c_.rw_clients > 0) {
            sqlock::lock_options o;
            o.lease = 5s;
            auto l = db.try_acquire(rw_key, o);
            free_keys << json{{"k", rw_key}, {"ok", l.has_value()}}.dump() << "\n";
        }
        if (c_.sem_clients > 0) {
            // Every one of the N permits is free again.
            sqlock::lock_options o;
            o.lease = 5s;
            std::vector<sqlock::lease> all;
            for (int i = 0; i < c_.permits; ++i)
                if (auto l = db.try_acquire_permit(semaphore, c_.permits, o)) all.push_back(std::move(*l));
            free_keys << json{{"k", semaphore}, {"ok", static_cast<int>(all.size()) == c_.permits}}.dump() << "\n";
        }
        log_->write({{"ev", "swept"}, {"rows", swept}});
    }

    cell_config c_;
    std::string backend_;
    std::mt19937 rng_;
    std::optional<event_log> log_;
    std::optional<board> board_;
    std::map<int, proc> procs_;
    int next_id_ = 1;
    std::map<std::string, std::size_t, std::less<>> picks_;  // per fault: victims picked so far
    int port_ = 0;
    bool root_ = false, skew_ = false, jump_ = false, storm_ = false;
};

}  // namespace

int run_cell(const cell_config& config) {
    cell c(config);
    return c.run();
}

}  // namespace campaign
