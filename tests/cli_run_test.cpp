// The `sqlock` command line, black-box: `sqlock run` against each backend —
// PROGRAM's status and environment, busy keys and waiting, every mode,
// --also, signals, lost leases, --once-per and --run-key through the job
// ledger, the fds PROGRAM gets, and the guardian that stops PROGRAM when
// sqlock cannot. The program runs as a separate process (support/cli.hpp).

#include "support/cli.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using test::cli;
using test::hold;
using test::lines;
using test::slurp;

TEST_SUITE("cli") {

void run_passes_status_and_environment(const test::backend_base& db) {
    cli sqlock(db);
    auto r = sqlock({"run", "k/env", "--", "sh", "-c", "echo \"$SQLOCK_KEY|$SQLOCK_TOKEN|${#SQLOCK_OWNER}\"; exit 7"});
    CHECK(r.status == 7);
    CHECK(r.out == "k/env|1|32\n");
    CHECK(r.err.empty());
    r = sqlock({"run", "k/env", "--", "true"});
    CHECK(r.status == 0);
    CHECK_FALSE(db.open().inspect("k/env").held);  // released after PROGRAM exited
    CHECK(db.open().inspect("k/env").token == 2);
    // Shell-special characters are an ordinary key.
    const std::string odd = "a b;$(touch x)|`id`&'\"*";
    r = sqlock({"run", odd, "--", "sh", "-c", "printf %s \"$SQLOCK_KEY\""});
    CHECK(r.status == 0);
    CHECK(r.out == odd);
}

CLI_TEST("run passes PROGRAM's status and the lease in its environment", run_passes_status_and_environment)

void busy_key_and_wait(const test::backend_base& db) {
    cli sqlock(db);
    auto holder = hold(sqlock, {}, "k/busy", "sleep 60");
    auto r = sqlock({"run", "k/busy", "--", "echo", "ran"});
    CHECK(r.status == 75);
    CHECK(r.out.empty());
    CHECK(r.one_line_message());
    CHECK(r.err.find("held by") != std::string::npos);
    r = sqlock({"run", "--conflict-exit-code", "3", "k/busy", "--", "echo", "ran"});
    CHECK(r.status == 3);
    r = sqlock({"run", "--wait", "250ms", "k/busy", "--", "echo", "ran"});
    CHECK(r.status == 75);
    CHECK(r.err.find("after waiting 250ms") != std::string::npos);
    auto waiter = sqlock.start({"run", "--wait", "30s", "k/busy", "--", "sh", "-c", "echo $SQLOCK_TOKEN"});
    std::this_thread::sleep_for(300ms);
    holder.signal(SIGTERM);  // forwarded: sleep ends, and sqlock releases
    CHECK(holder.wait(10s) == 128 + SIGTERM);
    CHECK(waiter.read_line(20s) == std::optional<std::string>("2"));  // granted once the holder released
    CHECK(waiter.wait(10s) == 0);
}

CLI_TEST("a busy key gives the conflict exit code, or the lock after --wait", busy_key_and_wait)

void run_also_holds_every_key(const test::backend_base& db) {
    cli sqlock(db);
    auto client = db.open();
    auto r = sqlock({"run", "k/m1", "--also", "k/m3", "--also", "k/m2", "--", "sh", "-c",
                     "echo \"$SQLOCK_KEY|$SQLOCK_KEY_COUNT|$SQLOCK_KEY_1|$SQLOCK_KEY_3|$SQLOCK_TOKEN_2\""});
    CHECK(r.status == 0);
    CHECK(r.out == "k/m1|3|k/m1|k/m3|1\n");
    for (const auto* k : {"k/m1", "k/m2", "k/m3"}) CHECK_FALSE(client.inspect(k).held);  // all released
    // A busy key: nothing run, the busy key named, no other key kept.
    auto holder = hold(sqlock, {}, "k/m2", "sleep 60");
    r = sqlock({"run", "k/m1", "--also", "k/m2", "--", "echo", "ran"});
    CHECK(r.status == 75);
    CHECK(r.out.empty());
    CHECK(r.one_line_message());
    CHECK(r.err.find("'k/m2' (of 'k/m1', 'k/m2') is held by") != std::string::npos);
    CHECK_FALSE(client.inspect("k/m1").held);
    // --wait: queued for the busy key, holding none of the others meanwhile.
    auto waiter = sqlock.start({"run", "--wait", "30s", "k/m2", "--also", "k/m1", "--", "sh", "-c", "echo $SQLOCK_TOKEN"});
    REQUIRE(test::eventually([&] { return client.waiters("k/m2").size() == 1; }));
    CHECK(client.try_acquire("k/m1"));
    holder.signal(SIGTERM);
    CHECK(holder.wait(10s) == 128 + SIGTERM);
    CHECK(waiter.read_line(20s) == std::optional<std::string>("3"));  // k/m2's third grant
    CHECK(waiter.wait(10s) == 0);
    // Losing any key stops PROGRAM: exit 70.
    auto polite = hold(sqlock, {"--lease", "6s", "--also", "k/m4"}, "k/m3",
                       "trap 'echo term; exit 0' TERM; echo held; while :; do sleep 0.05; done");
    CHECK(sqlock({"release", "--force", "k/m4"}).status == 0);
    CHECK(polite.read_line(10s) == std::optional<std::string>("term"));
    CHECK(polite.wait(10s) == 70);
    CHECK_FALSE(client.inspect("k/m3").held);
    // Bad input: exit 64 before PROGRAM or the database.
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"run", "k/a", "--also", "k/a", "--", "true"},
             {"run", "k/a", "--also", "k/b", "--shared", "--", "true"},
             {"run", "k/a", "--also", "k/b", "--permits", "2", "--", "true"},
             {"run", "k/a", "--also", "k/b", "--mode", "select-for-update", "--", "true"},
             {"run", "k/a", "--also", "", "--", "true"},
             // The library's bounds, checked before connecting too.
             {"run", "k/a", "--lease", "25d", "--", "true"},
             {"run", "--run-key", "r1", "--max-attempts", "5000", "k/a", "--", "true"}}) {
        r = sqlock(args);
        CHECK(r.status == 64);
        CHECK(r.one_line_message());
    }
}

CLI_TEST("run --also holds KEY and every --also key, all or none; losing one stops PROGRAM", run_also_holds_every_key)

void every_mode_and_fair_waiting(const test::backend_base& db) {
    cli sqlock(db);
    std::int64_t last = 0;
    for (std::string m : {"insert", "update", "select-for-update"}) {
        CAPTURE(m);
        auto r = sqlock({"run", "--mode", m, "k/mode", "--", "sh", "-c", "echo $SQLOCK_TOKEN"});
        if (m == "select-for-update" && !db.row_locks()) {
            CHECK(r.status == 64);  // SQLite has no row locks: said so, nothing run
            CHECK(r.one_line_message());
            continue;
        }
        CHECK(r.status == 0);
        CHECK(std::stoll(r.out) > last);
        last = std::stoll(r.out);
    }
    auto holder = hold(sqlock, {}, "k/fair", "sleep 1");
    auto r = sqlock({"run", "--fair", "--priority", "5", "--wait", "20s", "k/fair", "--", "true"});
    CHECK(r.status == 0);
    CHECK(holder.wait(10s) == 0);
}

CLI_TEST("every mode, and fair waiting with a priority", every_mode_and_fair_waiting)

void signals_reach_program(const test::backend_base& db) {
    cli sqlock(db);
    for (int sig : {SIGINT, SIGTERM}) {
        CAPTURE(sig);
        auto holder = hold(sqlock, {}, "k/sig",
                           "trap 'echo got $SQLOCK_TOKEN; exit 42' INT TERM; echo held; while :; do sleep 0.05; done");
        holder.signal(sig);
        const auto line = holder.read_line(10s);
        REQUIRE(line);
        CHECK(line->starts_with("got "));
        CHECK(holder.wait(10s) == 42);  // PROGRAM's own status
        CHECK_FALSE(db.open().inspect("k/sig").held);
    }
    // A signal while waiting for the key ends the wait; PROGRAM never starts.
    auto holder = hold(sqlock, {}, "k/sig", "sleep 30");
    test::temp_dir dir;
    const auto err = (dir.path / "err").string();
    auto waiter = sqlock.start_shell("exec \"$0\" run --wait 1m k/sig -- echo ran 2>'" + err + "'");
    std::this_thread::sleep_for(500ms);
    waiter.signal(SIGTERM);
    CHECK(waiter.wait(10s) == 128 + SIGTERM);
    CHECK_FALSE(waiter.read_line(1s));  // PROGRAM never ran
    CHECK(slurp(err).starts_with("sqlock: interrupted by SIGTERM while waiting for 'k/sig'"));
    CHECK(lines(slurp(err)).size() == 1);
}

CLI_TEST("SIGINT and SIGTERM reach PROGRAM, and the lock is released after it exits", signals_reach_program)

void lost_lease_stops_program(const test::backend_base& db) {
    cli sqlock(db);
    auto client = db.open();
    // PROGRAM that stops on SIGTERM.
    auto polite = hold(sqlock, {"--lease", "6s"}, "k/lost", "trap 'echo term; exit 0' TERM; echo held; while :; do sleep 0.05; done");
    const auto before = client.inspect("k/lost").token;
    auto r = sqlock({"release", "--force", "k/lost"});
    CHECK(r.status == 0);
    CHECK(r.out.find("released 'k/lost'") != std::string::npos);
    CHECK(r.err.find("force release of 'k/lost' by ") != std::string::npos);  // who did it, logged
    CHECK(client.inspect("k/lost").token == before + 1);
    CHECK(polite.read_line(10s) == std::optional<std::string>("term"));
    CHECK(polite.wait(10s) == 70);
    // PROGRAM that ignores SIGTERM gets SIGKILL after the grace period, and
    // sqlock says so in one line.
    test::temp_dir dir;
    const auto err = (dir.path / "err").string();
    auto stubborn = sqlock.start_shell(
        "exec \"$0\" run --lease 6s --kill-after 300ms k/lost -- "
        "sh -c \"trap '' TERM; echo held; while :; do sleep 0.05; done\" 2>'" + err + "'");
    REQUIRE(stubborn.read_line(15s) == std::optional<std::string>("held"));
    CHECK(sqlock({"release", "--force", "k/lost"}).status == 0);
    CHECK(stubborn.wait(10s) == 70);
    const auto message = slurp(err);
    CHECK(lines(message).size() == 1);
    CHECK(message.find("lost the lease on 'k/lost'") != std::string::npos);
    CHECK(message.find("then SIGKILL after 300ms") != std::string::npos);
    // The lease can also run out under it: the database row taken away.
    auto robbed = hold(sqlock, {"--lease", "1s", "--kill-after", "300ms"}, "k/lost2", "sleep 30");
    db.raw()->exec("DELETE FROM " + db.table("locks"));
    CHECK(robbed.wait(10s) == 70);
    CHECK(client.try_acquire("k/lost2"));
}

CLI_TEST("a lost lease stops PROGRAM: SIGTERM, SIGKILL after --kill-after, exit 70", lost_lease_stops_program)

namespace {

// The state letter of process `pid` in /proc/PID/stat (R, S, T, Z, ...);
// '\0' when there is no such process.
char process_state(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '\0';
}

// Whether process `pid` ends within 10 s (gone, or a zombie its parent has
// not reaped yet: a killed orphan waits for whichever process adopts it).
bool ends(pid_t pid) {
    return test::eventually([&] {
        if (::kill(pid, 0) != 0) return errno == ESRCH;
        return process_state(pid) == 'Z';
    }, 10s);
}

// CPU time (user + system, in clock ticks) the process has used so far.
long cpu_ticks(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i == 14) utime = std::stol(field);
        if (i == 15) stime = std::stol(field);
    }
    return utime + stime;
}

// A PROGRAM that holds until stopped, once it has said "held".
const std::string held_until_stopped = "echo held; while :; do sleep 0.05; done";

// hold() with a script that first writes a pid to PIDFILE (the placeholder
// is replaced by a file of its own): the holder and that pid.
std::pair<test::child, pid_t> hold_with_pid(const cli& sqlock, std::vector<std::string> options,
                                            const std::string& key, std::string script) {
    test::temp_dir dir;
    const auto file = (dir.path / "pid").string();
    script.replace(script.find("PIDFILE"), 7, file);
    auto holder = hold(sqlock, std::move(options), key, script);
    return {std::move(holder), std::stoi(slurp(file))};
}

}  // namespace

void program_in_a_group_of_its_own_is_stopped(const test::backend_base& db) {
    // GNU timeout moves itself to a process group of its own (setpgid) and
    // runs its command there. Every signal for PROGRAM went to the group
    // sqlock made for it, which PROGRAM had left: after a lost lease it ran
    // on without the lock, and sqlock waited for it.
    cli sqlock(db);
    const std::string in_timeout = "exec timeout 1h sh -c 'echo $$ > PIDFILE; " + held_until_stopped + "'";
    auto [moved, script] = hold_with_pid(sqlock, {"--lease", "6s", "--kill-after", "5s"}, "k/moved", in_timeout);
    CHECK(sqlock({"release", "--force", "k/moved"}).status == 0);
    CHECK(moved.wait(10s) == 70);
    CHECK(ends(script));  // timeout's command, in timeout's group
    // A signal to sqlock reaches it too.
    auto [signalled, script2] = hold_with_pid(sqlock, {}, "k/moved2", in_timeout);
    signalled.signal(SIGTERM);
    CHECK(signalled.wait(10s) != -1);
    CHECK(ends(script2));
}

CLI_TEST("PROGRAM that moves to a process group of its own is still stopped and signalled",
         program_in_a_group_of_its_own_is_stopped)

void guardian_waits_out_the_grace_without_spinning(const test::backend_base& db) {
    // After its SIGTERM the guardian waits --kill-after before the SIGKILL.
    // It polled with the lease's deadline, already past, as its timeout: a
    // loop that used a whole core for the grace period, beside a PROGRAM
    // shutting down. CPU time, not wall time: a waiting guardian uses none
    // of the 2 s watched, a spinning one whatever share of a core it gets.
    cli sqlock(db);
    // The group's id: the pid of its first process, the guardian.
    auto [stubborn, guardian] = hold_with_pid(sqlock, {"--lease", "6s", "--kill-after", "4s"}, "k/grace",
                                              "trap '' TERM; ps -o pgid= $$ > PIDFILE; " + held_until_stopped);
    CHECK(sqlock({"release", "--force", "k/grace"}).status == 0);
    std::this_thread::sleep_for(300ms);  // the SIGTERM sent, the grace begun
    const long before = cpu_ticks(guardian);
    std::this_thread::sleep_for(2s);
    const long used = cpu_ticks(guardian) - before;
    const long per_second = ::sysconf(_SC_CLK_TCK);
    CAPTURE(used);
    CHECK(used <= per_second / 20);  // a spinning one took 31-200 ticks here, by the machine's load
    CHECK(stubborn.wait(15s) == 70);
}

CLI_TEST("the guardian waits out --kill-after without spinning", guardian_waits_out_the_grace_without_spinning)

// A grant answered after its own lease ran out (its statement waited on the
// database longer than the lease) is lost before PROGRAM starts; another owner
// may already hold the key, so PROGRAM must not run at all. SQLite, because its
// grant waits for the write lock up to statement_timeout (10 s); the servers'
// row lock waits end long before a lease. The check is the CLI's, the same for
// every backend.
TEST_CASE("sqlock run does not start PROGRAM under a lease its grant outlived") {
    test::sqlite_db db;
    cli sqlock(db);
    REQUIRE(sqlock({"run", "k/late", "--", "true"}).status == 0);  // the schema and the key's rows exist
    auto writer = db.raw();
    writer->begin();  // BEGIN IMMEDIATE: sqlock's grant waits for this
    test::temp_dir dir;
    const auto err = (dir.path / "err").string();
    auto late = sqlock.start_shell("exec \"$0\" run --lease 300ms k/late -- echo ran 2>'" + err + "'");
    std::this_thread::sleep_for(3s);  // sqlock sent its grant long before; its 300 ms lease has passed
    writer->commit();
    const auto out = late.read_line(15s);
    CHECK(late.wait(15s) == 70);
    CHECK_FALSE(out);  // "ran" never printed: PROGRAM did not start
    const auto message = slurp(err);
    CHECK(lines(message).size() == 1);
    CHECK(message.find("it was not run") != std::string::npos);
}

// Running, and not a zombie nobody reaped.
bool running(pid_t pid) {
    const char state = process_state(pid);
    return state != '\0' && state != 'Z';
}

void program_never_outlives_lease(const test::backend_base& db) {
    cli sqlock(db);
    test::temp_dir dir;
    const auto log = (dir.path / "log").string();

    // kill -9 of sqlock: PROGRAM and what it started die with it at once,
    // not when the lease runs out.
    test::child killed = sqlock.start({"run", "--lease", "30s", "k/dead2", "--", "sh", "-c", "sleep 300 & echo $!; wait"});
    const auto grandchild = killed.read_line(15s);
    REQUIRE(grandchild);
    const pid_t sleeper = std::stoi(*grandchild);
    CHECK(running(sleeper));
    killed.signal(SIGKILL);
    CHECK(test::eventually([&] { return !running(sleeper); }, 5s));

    // SIGSTOP of sqlock past its lease: PROGRAM is stopped (SIGTERM) before
    // the lease can run out in the database, so before anyone else can run.
    // An 8 s lease: its 800 ms safety margin is PROGRAM's time to go.
    auto frozen = hold(sqlock, {"--lease", "8s"}, "k/frozen",
                       "trap 'echo term >> " + log + "; exit 0' TERM; echo held; while :; do sleep 0.05; done");
    frozen.signal(SIGSTOP);
    auto r = sqlock({"run", "--wait", "20s", "k/frozen", "--", "sh", "-c", "echo second >> " + log});
    CHECK(r.status == 0);
    CHECK(slurp(log) == "term\nsecond\n");
    frozen.signal(SIGCONT);
    CHECK(frozen.wait(10s) == 70);  // and it says the lease was lost
}

CLI_TEST("PROGRAM never outlives its lease: sqlock killed or frozen", program_never_outlives_lease)

void once_per_runs_once_per_period(const test::backend_base& db) {
    cli sqlock(db);
    test::temp_dir dir;
    const auto log = (dir.path / "log").string();
    std::map<int, int> statuses;
    for (int round = 0; round < 3; ++round) {
        std::vector<test::child> batch;
        for (int i = 0; i < 8; ++i)
            batch.push_back(sqlock.start({"run", "--once-per", "1s", "--wait", "5s", "report", "--", "sh", "-c",
                                          "echo \"$SQLOCK_RUN_KEY\" >> '" + log + "'; sleep 0.2"}));
        for (auto& c : batch) ++statuses[c.wait(30s)];
        std::this_thread::sleep_for(1s);
    }
    CHECK(statuses.size() == 2);  // 0 for the one that ran, 75 for the others
    CHECK(statuses[0] >= 3);
    CHECK(statuses[0] + statuses[75] == 24);
    // Every period that ran is in the ledger once, succeeded, and ran once.
    std::multiset<std::string> executed;
    for (const auto& l : lines(slurp(log))) executed.insert(l);
    auto r = sqlock({"runs", "--json", "report"});
    CHECK(r.status == 0);
    const auto runs = nlohmann::json::parse(r.out);
    CHECK(runs.size() == static_cast<std::size_t>(statuses[0]));
    for (const auto& run : runs) {
        CHECK(run["status"] == "succeeded");
        CHECK(run["attempts"] == 1);
        CHECK(executed.count(run["run_key"].get<std::string>()) == 1);
    }
    CHECK(executed.size() == runs.size());
    r = sqlock({"runs", "report"});
    CHECK(r.out.starts_with("JOB"));
    CHECK(lines(r.out).size() == runs.size() + 1);
}

CLI_TEST("--once-per runs exactly once per period across 8 concurrent invocations", once_per_runs_once_per_period)

void run_key_retries_failures(const test::backend_base& db) {
    cli sqlock(db);
    auto r = sqlock({"run", "--run-key", "batch-7", "--max-attempts", "2", "import", "--", "sh", "-c",
                     "echo attempt $SQLOCK_ATTEMPT; exit 5"});
    CHECK(r.status == 5);  // PROGRAM's status, and the failure is in the ledger
    CHECK(r.out == "attempt 1\n");
    std::this_thread::sleep_for(1100ms);  // the retry backoff
    r = sqlock({"run", "--run-key", "batch-7", "--max-attempts", "2", "import", "--", "sh", "-c",
                "echo attempt $SQLOCK_ATTEMPT"});
    CHECK(r.status == 0);
    CHECK(r.out == "attempt 2\n");
    r = sqlock({"run", "--run-key", "batch-7", "import", "--", "echo", "again"});
    CHECK(r.status == 75);
    CHECK(r.out.empty());
    CHECK(r.one_line_message());
    CHECK(r.err.find("already ran") != std::string::npos);
    const auto runs = nlohmann::json::parse(sqlock({"runs", "--json"}).out);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0]["attempts"] == 2);
    CHECK(runs[0]["status"] == "succeeded");
}

CLI_TEST("--run-key: a failed run is retried by a later call, a finished one is not", run_key_retries_failures)

void program_not_found_uses_no_attempt(const test::backend_base& db) {
    // PROGRAM was looked up after the run was claimed: a typo was recorded as
    // a failed attempt, and with --max-attempts 1 the corrected command then
    // found the run key failed for good (exit 75, "no attempts left").
    cli sqlock(db);
    auto r = sqlock({"run", "--run-key", "r1", "--max-attempts", "1", "typo", "--", "no-such-program-sqlock"});
    CHECK(r.status == 127);
    CHECK(r.one_line_message());
    r = sqlock({"run", "--run-key", "r1", "--max-attempts", "1", "typo", "--", "/nonexistent/sqlock-program"});
    CHECK(r.status == 127);
    CHECK(nlohmann::json::parse(sqlock({"runs", "--json"}).out).empty());  // nothing claimed, nothing recorded
    r = sqlock({"run", "--run-key", "r1", "--max-attempts", "1", "typo", "--", "sh", "-c", "echo ran"});
    CHECK(r.status == 0);
    CHECK(r.out == "ran\n");
    // Nor does a plain run wait for a key it could not run PROGRAM under: it
    // ends while the holder still holds the key (it waited for the release).
    auto holder = hold(sqlock, {}, "k/typo", "sleep 30");
    r = sqlock({"run", "--wait", "60s", "k/typo", "--", "no-such-program-sqlock"});
    CHECK(r.status == 127);
    CHECK(db.open().inspect("k/typo").held);
    holder.signal(SIGTERM);
    CHECK(holder.wait(10s) == 128 + SIGTERM);
}

CLI_TEST("a PROGRAM that is not found is exit 127 before the lock: no attempt used, no wait", program_not_found_uses_no_attempt)

void fds_and_terminal(const test::backend_base& db) {
    cli sqlock(db);
    // The database connections are open while PROGRAM runs; it sees none.
    auto r = sqlock({"run", "k/fd", "--", "sh", "-c", "ls /proc/$$/fd"});
    CHECK(r.status == 0);
    CHECK(lines(r.out) == std::vector<std::string>{"0", "1", "2"});
    // Descriptors handed to sqlock (here 3, and whatever the test process
    // leaves open) are handed on, like flock(1) does: PROGRAM sees exactly
    // what a shell in sqlock's place would have seen.
    auto fds_of = [&](const std::string& runner) {
        auto c = sqlock.start_shell("exec 3</dev/null; exec " + runner + " sh -c 'ls /proc/$$/fd'");
        std::vector<std::string> fds;
        while (auto line = c.read_line(15s)) fds.push_back(*line);
        CHECK(c.wait(10s) == 0);
        return fds;
    };
    const auto through_sqlock = fds_of("\"$0\" run k/fd --");
    CHECK(std::find(through_sqlock.begin(), through_sqlock.end(), "3") != through_sqlock.end());
    CHECK(through_sqlock == fds_of(""));

    // On a terminal (script(1) gives it one), PROGRAM can read its answer.
    test::temp_dir dir;
    const auto input = dir.path / "in";
    std::ofstream(input) << "yes\n";
    auto tty = sqlock.start_shell("exec script -qec \"$0 run k/tty -- sh -c 'read x; echo got:\\$x'\" /dev/null < '" +
                                  input.string() + "'");
    std::vector<std::string> out;
    while (auto line = tty.read_line(20s)) out.push_back(*line);
    CHECK(tty.wait(10s) == 0);
    CHECK(std::find(out.begin(), out.end(), "got:yes\r") != out.end());
}

CLI_TEST("PROGRAM gets the fds sqlock was given and none of its own; a terminal works", fds_and_terminal)

void durations_too_long_for_the_clock(const test::backend_base& db) {
    cli sqlock(db);
    // --wait longer than the clock can count waits rather than timing out.
    auto holder = hold(sqlock, {}, "k/long-wait", "sleep 1");
    auto r = sqlock({"run", "--wait", "1000000d", "k/long-wait", "--", "true"});
    CHECK(r.status == 0);
    CHECK(holder.wait(15s) == 0);
    // A lease past the one maximum is a usage error naming it.
    r = sqlock({"run", "--lease", "30d", "k/long-lease", "--", "true"});
    CHECK(r.status == 64);
    CHECK(r.err.find("max_duration") != std::string::npos);
    // --kill-after longer than the clock can count: after a loss PROGRAM gets
    // SIGTERM and is never SIGKILLed by sqlock (it used to be at once).
    auto stubborn = hold(sqlock, {"--lease", "2s", "--kill-after", "1000000d"}, "k/stubborn",
                         "trap 'echo term' TERM; echo held; echo $$; while :; do sleep 0.05; done");
    const auto pid_line = stubborn.read_line(10s);
    REQUIRE(pid_line);
    const pid_t program = std::stoi(*pid_line);
    db.open().force_release("k/stubborn", "test");
    CHECK(test::line_or_eof(stubborn.read_line(10s)) == "term");
    std::this_thread::sleep_for(1500ms);
    CHECK(running(program));
    ::kill(program, SIGKILL);
    CHECK(stubborn.wait(15s) == 70);
}

CLI_TEST("durations too long for the clock wait, never fire at once", durations_too_long_for_the_clock)

void guardian_death_does_not_spin(const test::backend_base& db) {
    cli sqlock(db);
    // PROGRAM's process group is led by the guardian: kill it under PROGRAM.
    auto c = hold(sqlock, {}, "k/guardian", "echo held; cut -d' ' -f5 /proc/$$/stat; sleep 4");
    const auto pgid = c.read_line(10s);
    REQUIRE(pgid);
    REQUIRE(::kill(std::stoi(*pgid), SIGKILL) == 0);
    std::this_thread::sleep_for(300ms);
    const long before = cpu_ticks(c.pid());
    std::this_thread::sleep_for(1500ms);
    // A closed socket polled in a loop burns a core (150 ticks in 1.5 s).
    CHECK(cpu_ticks(c.pid()) - before < 40);
    CHECK(c.wait(15s) == 0);  // PROGRAM ran to its end
}

CLI_TEST("sqlock goes on quietly when PROGRAM's guardian dies", guardian_death_does_not_spin)

void sigchld_ignored_by_the_parent(const test::backend_base& db) {
    // A parent that ignored SIGCHLD (SIG_IGN survives exec): the kernel
    // reaped PROGRAM by itself, waitpid() failed with ECHILD from then on,
    // and sqlock spun at 100% CPU, renewing the lock, after PROGRAM's exit.
    // (env(1), not the shell's `trap '' CHLD`: dash leaves SIGCHLD as it is.)
    cli sqlock(db);
    auto c = sqlock.start_shell("exec env --ignore-signal=CHLD \"$0\" run k/chld -- sh -c 'echo ran; exit 3'");
    CHECK(c.read_line(15s) == std::optional<std::string>("ran"));
    CHECK(c.wait(10s) == 3);
    CHECK_FALSE(db.open().inspect("k/chld").held);
}

CLI_TEST("sqlock started with SIGCHLD ignored ends when PROGRAM does", sigchld_ignored_by_the_parent)

namespace {

// The SigIgn mask (bit n-1: signal n ignored) PROGRAM starts with when
// `launcher` (env with options) starts sqlock.
unsigned long long ignored_by_program(const cli& sqlock, const std::string& launcher) {
    auto c = sqlock.start_shell("exec " + launcher + " \"$0\" run k/sigign -- grep ^SigIgn: /proc/self/status");
    const auto line = c.read_line(15s);
    CHECK(c.wait(10s) == 0);
    REQUIRE(line);
    return std::stoull(line->substr(7), nullptr, 16);
}

constexpr unsigned long long bit(int sig) { return 1ULL << (sig - 1); }

}  // namespace

void program_gets_the_signal_dispositions_sqlock_got(const test::backend_base& db) {
    // libmariadb sets SIGPIPE to SIG_IGN, which survived execve: PROGRAM
    // ran with it ignored, and `yes | head -1` in it never ended. PROGRAM
    // gets what sqlock was started with, like flock(1): ignored if it was.
    cli sqlock(db);
    CHECK((ignored_by_program(sqlock, "env --default-signal") & (bit(SIGPIPE) | bit(SIGCHLD))) == 0);
    CHECK((ignored_by_program(sqlock, "env --default-signal --ignore-signal=PIPE") & bit(SIGPIPE)) != 0);
    const auto chld = ignored_by_program(sqlock, "env --default-signal --ignore-signal=CHLD,HUP");
    CHECK((chld & bit(SIGCHLD)) != 0);
    CHECK((chld & bit(SIGHUP)) != 0);
    CHECK((chld & bit(SIGPIPE)) == 0);
}

CLI_TEST("PROGRAM starts with the signal dispositions sqlock was started with", program_gets_the_signal_dispositions_sqlock_got)

void closed_stdio_is_dev_null(const test::backend_base& db) {
    // cron and some daemons start programs with fd 0-2 closed: sqlock's
    // database connection got fd 2, and its own messages went into it.
    // sqlock and PROGRAM both get /dev/null there instead.
    cli sqlock(db);
    auto c = sqlock.start_shell(
        "exec \"$0\" run k/closed -- sh -c "
        "'for f in 0 2; do readlink /proc/$PPID/fd/$f; readlink /proc/$$/fd/$f || echo closed; done' 0<&- 2>&-");
    std::vector<std::string> out;
    while (auto line = c.read_line(15s)) out.push_back(*line);
    CHECK(c.wait(10s) == 0);
    CHECK(out == std::vector<std::string>(4, "/dev/null"));
}

CLI_TEST("closed stdin and stderr are /dev/null, never a database connection", closed_stdio_is_dev_null)

void stopped_program_still_stops(const test::backend_base& db) {
    // A stopped PROGRAM (SIGSTOP, or SIGTTIN from a read in the background)
    // does not act on a signal until it is continued: sqlock waited for it
    // forever, holding the lock. Like a shell's `kill` of a stopped job,
    // SIGCONT follows.
    cli sqlock(db);
    auto stopped_program = [](test::child& holder) {
        const auto pid = holder.read_line(10s);
        REQUIRE(pid);
        const pid_t program = std::stoi(*pid);
        REQUIRE(::kill(program, SIGSTOP) == 0);
        REQUIRE(test::eventually([&] { return process_state(program) == 'T'; }));
    };
    auto holder = hold(sqlock, {}, "k/stopped", "echo held; echo $$; while :; do sleep 0.05; done");
    stopped_program(holder);
    holder.signal(SIGTERM);
    CHECK(holder.wait(10s) == 128 + SIGTERM);
    CHECK_FALSE(db.open().inspect("k/stopped").held);
    // The guardian's SIGTERM after a loss too: a PROGRAM that ends on it
    // does, long before the SIGKILL.
    auto polite = hold(sqlock, {"--lease", "6s", "--kill-after", "1h"}, "k/stopped",
                       "trap 'echo term; exit 0' TERM; echo held; echo $$; while :; do sleep 0.05; done");
    stopped_program(polite);
    CHECK(sqlock({"release", "--force", "k/stopped"}).status == 0);
    CHECK(test::line_or_eof(polite.read_line(10s)) == "term");
    CHECK(polite.wait(10s) == 70);
}

CLI_TEST("a stopped PROGRAM is continued after SIGTERM, so it ends", stopped_program_still_stops)

void more_signals_reach_program(const test::backend_base& db) {
    // SIGUSR1, SIGUSR2, SIGQUIT and SIGALRM ended sqlock, and PROGRAM then
    // got SIGKILL from its guardian: they are PROGRAM's to handle.
    // Started through env(1): a shell cannot trap a signal ignored at its
    // start, and the test may run with SIGQUIT ignored.
    cli sqlock(db);
    auto holder = sqlock.start_shell(
        "exec env --default-signal \"$0\" run k/usr -- sh -c 'ulimit -c 0; "
        "for s in USR1 USR2 QUIT ALRM; do trap \"echo $s\" $s; done; echo held; while :; do sleep 0.05; done'");
    REQUIRE(test::line_or_eof(holder.read_line(15s)) == "held");
    for (auto [sig, name] : {std::pair{SIGUSR1, "USR1"}, {SIGUSR2, "USR2"}, {SIGQUIT, "QUIT"}, {SIGALRM, "ALRM"}}) {
        CAPTURE(name);
        holder.signal(sig);
        CHECK(test::line_or_eof(holder.read_line(10s)) == std::string(name));
    }
    CHECK(db.open().inspect("k/usr").held);
    holder.signal(SIGTERM);
    CHECK(holder.wait(10s) == 128 + SIGTERM);
    CHECK_FALSE(db.open().inspect("k/usr").held);
}

CLI_TEST("SIGUSR1, SIGUSR2, SIGQUIT and SIGALRM reach PROGRAM", more_signals_reach_program)

void nested_runs_see_only_their_own_lease(const test::backend_base& db) {
    // An inner `sqlock run` replaced only the variables it set itself: its
    // PROGRAM saw the outer run's --also keys and ledger run as its own.
    cli sqlock(db);
    const std::string show =
        "echo \"$SQLOCK_KEY|${SQLOCK_KEY_COUNT-unset}|${SQLOCK_KEY_2-unset}|${SQLOCK_TOKEN_1+token}|"
        "${SQLOCK_JOB-unset}|${SQLOCK_RUN_KEY-unset}|${SQLOCK_ATTEMPT-unset}|${SQLOCK_URL:+url}\"";
    auto r = sqlock({"run", "k/outer", "--also", "k/outer2", "--", SQLOCK_CLI, "run", "k/inner", "--", "sh", "-c", show});
    CHECK(r.status == 0);
    CHECK(r.out == "k/inner|unset|unset||unset|unset|unset|url\n");
    r = sqlock({"run", "--run-key", "r1", "outer-job", "--", SQLOCK_CLI, "run", "k/inner", "--", "sh", "-c", show});
    CHECK(r.status == 0);
    CHECK(r.out == "k/inner|unset|unset||unset|unset|unset|url\n");
    // The outer run's own PROGRAM still sees everything.
    r = sqlock({"run", "k/outer", "--also", "k/outer2", "--", "sh", "-c", show});
    CHECK(r.out == "k/outer|2|k/outer2|token|unset|unset|unset|url\n");
}

CLI_TEST("a nested run's PROGRAM sees only its own lease's variables", nested_runs_see_only_their_own_lease)

void script_without_shebang_runs_with_sh(const test::backend_base& db) {
    // execve() refuses a script without "#!" (ENOEXEC): it was exit 126,
    // where flock(1) (execvp) and every shell run it with /bin/sh.
    cli sqlock(db);
    test::temp_dir dir;
    const auto script = dir.path / "no-shebang";
    std::ofstream(script) << "echo \"hi $1 $#\"\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    auto r = sqlock({"run", "k/script", "--", script.string(), "there", "x"});
    CHECK(r.status == 0);
    CHECK(r.out == "hi there 2\n");
    CHECK(r.err.empty());
    // Not executable, or missing: still 126 and 127, nothing run.
    std::filesystem::permissions(script, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    r = sqlock({"run", "k/script", "--", script.string()});
    CHECK(r.status == 126);
    CHECK(r.out.empty());
    CHECK(r.one_line_message());
    r = sqlock({"run", "k/script", "--", (dir.path / "missing").string()});
    CHECK(r.status == 127);
    CHECK(r.one_line_message());
}

CLI_TEST("a script without #! runs with /bin/sh", script_without_shebang_runs_with_sh)

void default_kill_after_ends_program_inside_the_lease(const test::backend_base& db) {
    // The default --kill-after was 10 s, past the safety margin (a tenth of
    // the lease): a PROGRAM ignoring SIGTERM under a frozen sqlock still ran
    // when the database granted the key to the next owner. The default is
    // half the margin now.
    cli sqlock(db);
    auto holder = hold(sqlock, {"--lease", "10s"}, "k/strict",
                       "trap '' TERM; echo held; echo $$; while :; do sleep 0.1; done");
    const auto pid = holder.read_line(10s);
    REQUIRE(pid);
    const pid_t program = std::stoi(*pid);
    holder.signal(SIGSTOP);
    auto client = db.open();
    std::optional<sqlock::lease> next;
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!next && std::chrono::steady_clock::now() < until) {
        next = client.try_acquire("k/strict");
        if (!next) std::this_thread::sleep_for(20ms);
    }
    REQUIRE(next);
    // Gone, or a zombie: its parent sqlock is stopped and cannot reap it.
    const char state = process_state(program);
    CHECK((state == '\0' || state == 'Z'));
    holder.signal(SIGCONT);
    CHECK(holder.wait(10s) == 70);
}

CLI_TEST("by default PROGRAM is killed before the database can grant its key to another owner",
         default_kill_after_ends_program_inside_the_lease)


// /proc/PID/cmdline is readable by every user of the machine, for as long as
// `sqlock run` holds its key. PostgreSQL's test server trusts loopback, so a
// URL with any password connects.
TEST_CASE_TEMPLATE("the URL's password is hidden from the command line other users can read", Db, test::postgres_db) {
    Db db;
    test::cli sqlock(db);
    std::string url = db.url();
    const auto at = url.find('@');
    REQUIRE(at != std::string::npos);
    REQUIRE(url.find(':', url.find("://") + 3) > at);  // no password yet
    const std::string with_userinfo = url.substr(0, at) + ":userinfo-s3cret" + url.substr(at);
    const std::string with_parameter = url + "?password=param-s3cret";
    for (const auto& args : std::vector<std::vector<std::string>>{{"--url", with_userinfo}, {"--url=" + with_parameter}}) {
        auto holder = test::hold(sqlock, args, "k/argv", "sleep 60");
        std::ifstream in("/proc/" + std::to_string(holder.pid()) + "/cmdline");
        std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CHECK(cmdline.find("s3cret") == std::string::npos);
        CHECK(cmdline.find("******") != std::string::npos);
        CHECK(cmdline.find("k/argv") != std::string::npos);  // the rest is as given
        holder.signal(SIGTERM);
        holder.wait();
    }
}

}  // TEST_SUITE("cli")
