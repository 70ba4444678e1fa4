// The `sqlock` command line, black-box: the built program run as a separate
// process against each backend, its exit statuses, output, environment and
// signals checked from outside.

#include "support/commit_probe.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include "cli/duration.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace std::chrono_literals;

namespace {

struct result {
    int status = -1;  // exit status, or 128 + signal
    std::string out, err;
    // stderr holds exactly one line, starting "sqlock: ".
    bool one_line_message() const {
        return err.starts_with("sqlock: ") && err.find('\n') == err.size() - 1;
    }
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs `sqlock args...` with the backend's database in its environment.
class cli {
public:
    explicit cli(const test::backend_base& db)
        : env_{"SQLOCK_URL=" + db.url(), "SQLOCK_TABLE_PREFIX=" + db.prefix} {}

    result operator()(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) const {
        const auto out = dir_.path / "out", err = dir_.path / "err";
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // none of the test's own connections
        auto env_strings = environment(extra_env);
        std::vector<std::string> argv_strings{SQLOCK_CLI};
        argv_strings.insert(argv_strings.end(), args.begin(), args.end());
        auto argv = pointers(argv_strings);
        auto envp = pointers(env_strings);
        pid_t pid;
        REQUIRE(posix_spawn(&pid, SQLOCK_CLI, &actions, nullptr, argv.data(), envp.data()) == 0);
        posix_spawn_file_actions_destroy(&actions);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out), slurp(err)};
    }

    // `sqlock args...` in the background, its stdout readable line by line.
    test::child start(const std::vector<std::string>& args) const {
        std::vector<std::string> argv{SQLOCK_CLI};
        argv.insert(argv.end(), args.begin(), args.end());
        return test::child(argv, env_);
    }
    // `sh -c SCRIPT` with $0 the sqlock program, in the background.
    test::child start_shell(const std::string& script) const {
        return test::child({"sh", "-c", script, SQLOCK_CLI}, env_);
    }

private:
    std::vector<std::string> environment(const std::vector<std::string>& extra) const {
        std::vector<std::string> out;
        auto all = env_;
        all.insert(all.end(), extra.begin(), extra.end());
        for (char** e = environ; *e; ++e) {
            const std::string entry(*e);
            bool replaced = false;
            for (const auto& mine : all) replaced |= entry.substr(0, entry.find('=')) == mine.substr(0, mine.find('='));
            if (!replaced) out.push_back(entry);
        }
        out.insert(out.end(), all.begin(), all.end());
        return out;
    }
    static std::vector<char*> pointers(std::vector<std::string>& v) {
        std::vector<char*> out;
        for (auto& s : v) out.push_back(s.data());
        out.push_back(nullptr);
        return out;
    }

    std::vector<std::string> env_;
    test::temp_dir dir_;
};

// A holder in the background: `sqlock run ... KEY -- sh -c SCRIPT`. SCRIPT
// prints "held" first, or where `held` is given (after its traps are set).
test::child hold(const cli& run, std::vector<std::string> options, const std::string& key, const std::string& script) {
    std::vector<std::string> args{"run"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {key, "--", "sh", "-c", script.find("echo held") == std::string::npos ? "echo held; " + script : script});
    auto c = run.start(args);
    const auto line = c.read_line(15s);
    REQUIRE(line);
    CHECK(*line == "held");
    return c;
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

// The Prometheus text exposition format 0.0.4, read strictly
// (https://prometheus.io/docs/instrumenting/exposition_formats/): every line,
// each ending in a line feed, is "# HELP name text", "# TYPE name
// counter|gauge|histogram" or a sample "name{label="value",...} value"; names
// and label names are valid; a family has one TYPE, before its samples, and
// its lines are not interleaved with another family's; HELP and label values
// use only the escapes the format defines; no series appears twice. Throws
// std::runtime_error naming the line that breaks a rule.
struct prometheus {
    struct sample {
        std::string name;
        std::map<std::string, std::string> labels;
        double value = 0;
    };
    std::map<std::string, std::string> type, help;
    std::vector<sample> samples;

    // The samples of `name` whose labels include `with`.
    std::vector<sample> find(const std::string& name, const std::map<std::string, std::string>& with = {}) const {
        std::vector<sample> out;
        for (const auto& s : samples)
            if (s.name == name && std::all_of(with.begin(), with.end(), [&](const auto& l) {
                    const auto it = s.labels.find(l.first);
                    return it != s.labels.end() && it->second == l.second;
                }))
                out.push_back(s);
        return out;
    }
    // The value of the one sample of `name` with `with` among its labels.
    double value(const std::string& name, const std::map<std::string, std::string>& with = {}) const {
        const auto found = find(name, with);
        if (found.size() != 1)
            throw std::runtime_error(std::to_string(found.size()) + " samples of " + name + " match, not 1");
        return found.front().value;
    }
    double sum(const std::string& name) const {
        double total = 0;
        for (const auto& s : find(name)) total += s.value;
        return total;
    }

    static prometheus parse(const std::string& text) {
        prometheus doc;
        if (!text.empty() && text.back() != '\n') throw std::runtime_error("the last line has no line feed");
        std::set<std::string> finished;       // families whose lines have ended
        std::string current;                  // the family of the previous line
        std::set<std::string> series;         // name{labels} seen
        int number = 0;
        for (const auto& line : lines(text)) {
            ++number;
            auto fail = [&](const std::string& why) {
                throw std::runtime_error("line " + std::to_string(number) + " [" + line + "]: " + why);
            };
            // Every line belongs to a family; a family's lines come together.
            auto enter = [&](const std::string& family) {
                if (family == current) return;
                if (finished.count(family)) fail("the lines of " + family + " are not together");
                if (!current.empty()) finished.insert(current);
                current = family;
            };
            if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
                const bool is_help = line[2] == 'H';
                const auto rest = line.substr(7);
                const auto space = rest.find(' ');
                if (space == std::string::npos) fail("no text after the name");
                const auto name = rest.substr(0, space), what = rest.substr(space + 1);
                if (!metric_name(name)) fail("invalid metric name");
                enter(name);
                if (is_help) {
                    if (doc.help.count(name)) fail("a second HELP");
                    doc.help[name] = unescape(what, false, fail);
                } else {
                    if (doc.type.count(name)) fail("a second TYPE");
                    if (what != "counter" && what != "gauge" && what != "histogram") fail("unknown type " + what);
                    if (!doc.find(name).empty()) fail("TYPE after samples");
                    doc.type[name] = what;
                }
                continue;
            }
            if (line.empty() || line[0] == '#' || line[0] == ' ') fail("neither HELP, TYPE nor a sample");
            sample s;
            std::size_t at = 0;
            while (at < line.size() && line[at] != '{' && line[at] != ' ') ++at;
            s.name = line.substr(0, at);
            if (!metric_name(s.name)) fail("invalid metric name");
            std::string family = s.name;
            if (!doc.type.count(family)) {
                for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                    const std::string base = s.name.substr(0, s.name.size() - std::strlen(suffix));
                    if (s.name.ends_with(suffix) && doc.type.count(base) && doc.type[base] == "histogram") family = base;
                }
            }
            if (!doc.type.count(family)) fail("a sample before its family's TYPE");
            enter(family);
            std::string labels_text;
            if (at < line.size() && line[at] == '{') {
                const auto open = at++;
                for (;;) {
                    std::size_t name_end = at;
                    while (name_end < line.size() && line[name_end] != '=') ++name_end;
                    const auto label = line.substr(at, name_end - at);
                    if (!label_name(label)) fail("invalid label name [" + label + "]");
                    if (name_end + 1 >= line.size() || line[name_end + 1] != '"') fail("label value not quoted");
                    std::size_t v = name_end + 2;
                    std::string raw;
                    while (v < line.size() && line[v] != '"') {
                        if (line[v] == '\\' && v + 1 < line.size()) raw += line[v++];
                        raw += line[v++];
                    }
                    if (v >= line.size()) fail("unterminated label value");
                    if (s.labels.count(label)) fail("label " + label + " twice");
                    s.labels[label] = unescape(raw, true, fail);
                    at = v + 1;
                    if (at < line.size() && line[at] == ',') {
                        ++at;
                        continue;
                    }
                    if (at < line.size() && line[at] == '}') break;
                    fail("expected , or } after a label");
                }
                labels_text = line.substr(open, at + 1 - open);
                ++at;
            }
            if (at >= line.size() || line[at] != ' ') fail("no single space before the value");
            const auto value = line.substr(at + 1);
            if (value.empty() || value.find_first_of(" \tx") != std::string::npos) fail("a value, and only a value");
            if (value == "+Inf" || value == "-Inf" || value == "NaN") {
                s.value = value == "NaN" ? NAN : value == "+Inf" ? INFINITY : -INFINITY;
            } else {
                char* end = nullptr;
                s.value = std::strtod(value.c_str(), &end);
                if (end != value.c_str() + value.size() || std::isinf(s.value) || std::isnan(s.value))
                    fail("not a number");
            }
            if (!series.insert(s.name + labels_text).second) fail("the same series twice");
            doc.samples.push_back(std::move(s));
        }
        return doc;
    }

private:
    static bool metric_name(const std::string& n) {
        if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
        return std::all_of(n.begin(), n.end(),
                           [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; });
    }
    static bool label_name(const std::string& n) {
        if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])) || n.starts_with("__")) return false;
        return std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    }
    // HELP text: \\ and \n; label values also \".
    template <class Fail>
    static std::string unescape(const std::string& text, bool label, Fail&& fail) {
        std::string out;
        for (std::size_t i = 0; i < text.size(); ++i) {
            if (text[i] != '\\') {
                if (label && text[i] == '"') fail("an unescaped quote");
                out += text[i];
                continue;
            }
            const char next = i + 1 < text.size() ? text[++i] : '\0';
            if (next == '\\') out += '\\';
            else if (next == 'n') out += '\n';
            else if (next == '"' && label) out += '"';
            else fail(std::string("an escape the format does not define: \\") + next);
        }
        return out;
    }
};

}  // namespace

// Each test is a plain function, compiled once; CLI_TEST makes it a test
// case per backend (template bodies tripled this file's build time).
#define CLI_TEST(title, test)                          \
    TEST_CASE_TEMPLATE(title, Db, ALL_BACKENDS) {      \
        Db db;                                         \
        test(db);                                      \
    }

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
             {"run", "k/a", "--also", "", "--", "true"}}) {
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

// Running, and not a zombie nobody reaped.
bool running(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const auto close = line.rfind(')');
    return close != std::string::npos && line.size() > close + 2 && line[close + 2] != 'Z';
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

void release_force_fences_holder(const test::backend_base& db) {
    cli sqlock(db);
    auto a = db.open();
    auto b = db.open();
    for (auto m : test::modes_of(db)) {
        CAPTURE(sqlock::to_string(m));
        auto held = a.try_acquire("k/force", {.mode = m, .lease = 20s});
        REQUIRE(held);
        auto r = sqlock({"release", "--force", "k/force"});
        CHECK(r.status == 0);
        // The holder learns at its next renewal or ping and the key is free
        // long before its 20 s lease would have run out.
        CHECK(test::eventually([&] { return held->lost(); }, 10s));
        std::optional<sqlock::lease> next;
        CHECK(test::eventually([&] { return (next = b.try_acquire("k/force", {.mode = m})).has_value(); }, 10s));
        REQUIRE(next);
        CHECK(next->token() >= held->token() + 2);  // the forced bump sits between them
        next->release();
    }
    auto r = sqlock({"release", "--force", "k/never"});
    CHECK(r.status == 0);
    CHECK(r.out.find("never granted") != std::string::npos);
    r = sqlock({"release", "k/force"});
    CHECK(r.status == 64);
    CHECK(r.one_line_message());
}

CLI_TEST("release --force fences the holder off, in every mode", release_force_fences_holder)

void status_lists_locks_waiters_runs(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open();
    auto held = c.try_acquire("st/a", {.lease = 30s, .note = "nightly report"});
    REQUIRE(held);
    auto other = c.try_acquire("zz/other");
    REQUIRE(other);
    std::vector<std::thread> waiting;
    for (int priority : {1, 5}) {
        waiting.emplace_back([&, priority] {
            auto w = db.open();
            try {
                w.acquire("st/a", 30s, {.fair = true, .priority = priority}).release();
            } catch (const sqlock::error&) {
            }
        });
        REQUIRE(test::eventually([&] { return c.waiters("st/").size() == static_cast<std::size_t>(priority == 1 ? 1 : 2); }));
    }
    CHECK(sqlock({"run", "--run-key", "r1", "st/job", "--", "true"}).status == 0);

    auto r = sqlock({"status", "st/"});
    CHECK(r.status == 0);
    CHECK(r.out.find("HELD LOCKS (1)") != std::string::npos);
    CHECK(r.out.find("nightly report") != std::string::npos);
    CHECK(r.out.find("WAITERS (2)") != std::string::npos);
    CHECK(r.out.find("RECENT JOB RUNS (1)") != std::string::npos);
    CHECK(r.out.find("zz/other") == std::string::npos);

    r = sqlock({"status", "--json", "st/"});
    CHECK(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["locks"].size() == 1);
    CHECK(j["locks"][0]["key"] == "st/a");
    CHECK(j["locks"][0]["token"] == held->token());
    CHECK(j["locks"][0]["mode"] == "conditional_update");
    CHECK(j["locks"][0]["expires_in_ms"].get<std::int64_t>() > 0);
    REQUIRE(j["waiters"].size() == 2);
    CHECK(j["waiters"][0]["priority"] == 5);  // served first
    CHECK(j["waiters"][1]["priority"] == 1);
    CHECK(j["waiters"][0]["fair"] == true);
    REQUIRE(j["runs"].size() == 1);
    CHECK(j["runs"][0]["job"] == "st/job");
    CHECK(j["runs"][0]["status"] == "succeeded");

    r = sqlock({"status", "--json"});
    CHECK(nlohmann::json::parse(r.out)["locks"].size() == 2);
    held->release();
    other->release();
    for (auto& t : waiting) t.join();
}

CLI_TEST("status shows held locks, waiters in order and recent runs, as a table or JSON", status_lists_locks_waiters_runs)

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

void migrate_and_unavailable_database(const test::backend_base& db) {
    cli sqlock(db);
    const std::string fresh = "tcli" + test::random_hex(6) + "_";
    auto r = sqlock({"migrate", "--print-sql", "--table-prefix", fresh});
    CHECK(r.status == 0);
    CHECK(r.out.find("CREATE TABLE IF NOT EXISTS " + fresh + "locks") != std::string::npos);
    if (db.name() != "sqlite") {
        r = sqlock({"run", "--table-prefix", fresh, "k", "--", "echo", "ran"});
        CHECK(r.status == 69);
        CHECK(r.one_line_message());
        CHECK(r.err.find("sqlock migrate") != std::string::npos);
    }
    r = sqlock({"migrate", "--table-prefix", fresh});
    CHECK(r.status == 0);
    CHECK(r.out.find("to " + std::to_string(db.open_quiet().required_schema_version())) != std::string::npos);
    r = sqlock({"migrate", "--table-prefix", fresh});
    CHECK(r.out.find("up to date") != std::string::npos);
    CHECK(sqlock({"run", "--table-prefix", fresh, "k", "--", "true"}).status == 0);

    const std::string unreachable = db.name() == "postgres" ? "postgresql://sqlock@127.0.0.1:1/none?connect_timeout=2"
                                    : db.name() == "mysql"  ? "mysql://sqlock@127.0.0.1:1/none"
                                                            : "sqlite:/proc/no/such/dir/x.db";
    for (const auto& args : {std::vector<std::string>{"--url", unreachable, "run", "k", "--", "echo", "ran"},
                             std::vector<std::string>{"--url", unreachable, "status"}}) {
        r = sqlock(args);
        CHECK(r.status == 69);
        CHECK(r.out.empty());
        CHECK(r.one_line_message());
    }
}

CLI_TEST("migrate, and a missing schema or unreachable database is exit 69", migrate_and_unavailable_database)

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

void bad_input_is_usage_error(const test::backend_base& db) {
    cli sqlock(db);
    const std::vector<std::vector<std::string>> bad{
        {"run", "--bogus", "k", "--", "echo", "ran"},
        {"run", "k", "echo", "ran"},                      // no --
        {"run", "k", "--"},                               // no PROGRAM
        {"run", "--", "echo", "ran"},                     // no KEY
        {"run", "--lease", "10", "k", "--", "echo", "ran"},
        {"run", "--lease", "5x", "k", "--", "echo", "ran"},
        {"run", "--wait", "1m1h", "k", "--", "echo", "ran"},
        {"run", "--kill-after", "", "k", "--", "echo", "ran"},
        {"run", "--lease", "0s", "k", "--", "echo", "ran"},
        {"run", "--once-per", "0s", "k", "--", "echo", "ran"},
        {"run", "--mode", "exclusive", "k", "--", "echo", "ran"},
        {"run", "--priority", "high", "k", "--", "echo", "ran"},
        {"run", "--once-per", "1h", "--run-key", "x", "k", "--", "echo", "ran"},
        {"run", "--once-per", "1h", "job:with:colons", "--", "echo", "ran"},
        {"run", "", "--", "echo", "ran"},
        {"run", std::string(256, 'k'), "--", "echo", "ran"},
        {"run", "--url", "bogus://nowhere", "k", "--", "echo", "ran"},
        {"run", "--url", "postgresql://", "--table-prefix", "Bad-Prefix", "k", "--", "echo", "ran"},
        {"status", "--limit", "0"},
        {"status", "--metrics", "--json"},
        {"status", "--metrics", "st/"},
        {"status", "--watch", "--metrics"},
        {"status", "--watch", "--json"},
        {"status", "--count", "2"},
        {"status", "--interval", "1s"},
        {"status", "--watch", "--count", "0"},
        {"status", "--watch", "--interval", "10ms"},
        {"status", "--watch", "--interval", "soon"},
        {"release", "--force"},
        {"runs", "a", "b"},
        {"frobnicate"},
        {},
        {"--durability", "bogus", "status"},
        {"run", "--durability", "Relaxed", "k", "--", "echo", "ran"},
        {"--url", "postgresql://sqlock@127.0.0.1:1/none", "--durability", "fast", "status"},  // before connecting
    };
    for (const auto& args : bad) {
        std::string shown;
        for (const auto& a : args) shown += "[" + a.substr(0, 20) + "]";
        CAPTURE(shown);
        const auto r = sqlock(args);
        CHECK(r.status == 64);
        CHECK(r.out.empty());
        CHECK(r.one_line_message());
    }
    auto r = sqlock({"status"}, {"SQLOCK_DURABILITY=bogus"});
    CHECK(r.status == 64);
    CHECK(r.one_line_message());
    CHECK(r.err.find("SQLOCK_DURABILITY: 'bogus'") != std::string::npos);
    // PROGRAM that cannot be run: the shell's statuses, and the key is free again.
    r = sqlock({"run", "k", "--", "/no/such/program"});
    CHECK(r.status == 127);
    CHECK(r.one_line_message());
    r = sqlock({"run", "k", "--", "no-such-program-on-path"});
    CHECK(r.status == 127);
    CHECK_FALSE(db.open().inspect("k").held);
    // --help works on every command.
    for (std::string cmd : {"", "migrate", "run", "status", "release", "runs"}) {
        r = cmd.empty() ? sqlock({"--help"}) : sqlock({cmd, "--help"});
        CHECK(r.status == 0);
        CHECK(r.out.find("Usage") != std::string::npos);
    }
    CHECK(sqlock({"--help"}).out.find("--durability") != std::string::npos);
}

CLI_TEST("bad input is exit 64 with a one-line message, before PROGRAM or the database", bad_input_is_usage_error)

void durability_option(const test::backend_base& db) {
    cli sqlock(db);
    const std::vector<std::string> unset{"SQLOCK_DURABILITY="};
    if (db.name() == "mysql") {
        // No per-session setting to relax: refused in one line, nothing run.
        for (const auto& r : {sqlock({"--durability", "relaxed", "run", "k/dur", "--", "echo", "ran"}, unset),
                              sqlock({"run", "k/dur", "--", "echo", "ran"}, {"SQLOCK_DURABILITY=relaxed"})}) {
            CHECK(r.status == 64);
            CHECK(r.out.empty());
            CHECK(r.one_line_message());
            CHECK(r.err.find("innodb_flush_log_at_trx_commit") != std::string::npos);
        }
        CHECK(sqlock({"--durability", "strict", "run", "k/dur", "--", "true"}, unset).status == 0);
        return;
    }
    test::commit_probe probe(db);
    auto r = sqlock({"--durability", "relaxed", "run", "k/dur", "--", "echo", "ran"}, unset);
    CHECK(r.status == 0);
    CHECK(r.out == "ran\n");
    CHECK(sqlock({"run", "--durability=relaxed", "k/dur", "--", "true"}, unset).status == 0);
    CHECK(sqlock({"run", "k/dur", "--", "true"}, {"SQLOCK_DURABILITY=relaxed"}).status == 0);
    CHECK(probe.writes() >= 6);
    CHECK(probe.writes_with(probe.relaxed()) == probe.writes());
    // Strict is the default, and --durability wins over the environment.
    const auto before = probe.writes();
    CHECK(sqlock({"run", "k/dur", "--", "true"}, unset).status == 0);
    CHECK(sqlock({"--durability", "strict", "run", "k/dur", "--", "true"}, {"SQLOCK_DURABILITY=relaxed"}).status == 0);
    CHECK(probe.writes() >= before + 4);
    CHECK(probe.writes_with(probe.strict()) == probe.writes() - before);
}

CLI_TEST("--durability relaxed or $SQLOCK_DURABILITY relaxes sqlock's commits; MySQL refuses it", durability_option)

void no_output_shows_a_password(const test::backend_base& db) {
    if (db.name() == "sqlite") return;  // SQLite URLs hold no password
    cli sqlock(db);
    const std::string url = db.url();
    const auto hostport = url.substr(url.find('@') + 1, url.find('/', url.find('@')) - url.find('@') - 1);
    const std::string scheme = db.name() == "postgres" ? "postgresql://" : "mysql://";
    const std::vector<std::pair<std::string, std::vector<std::string>>> shapes{
        {scheme + "sqlock:50%off@" + hostport + "/sqlock_test", {"50%off", "off"}},
        {scheme + "sqlock:Zq9/xW7@" + hostport + "/sqlock_test", {"Zq9", "xW7"}},
        {scheme + "sqlock:Kq4#Pz8@" + hostport + "/sqlock_test", {"Kq4", "Pz8"}},
        {scheme + "sqlock:Jh5@Lk2@" + hostport + "/sqlock_test", {"Jh5", "Lk2"}},
        {scheme + "sqlock:Qw1%2FEr4@127.0.0.1:1/sqlock_test", {"Qw1", "Er4"}},
        {scheme + "sqlock:Wrong%23Pw9@" + hostport + "/sqlock_test", {"Wrong", "Pw9"}},
    };
    for (const auto& [bad_url, secrets] : shapes) {
        CAPTURE(bad_url);
        for (const auto& args : {std::vector<std::string>{"--url", bad_url, "status"},
                                 std::vector<std::string>{"--url", bad_url, "-v", "run", "k", "--", "true"}}) {
            auto r = sqlock(args);
            CHECK(r.status != 0);
            CHECK(r.one_line_message());
            for (const auto& secret : secrets) {
                CHECK_MESSAGE(r.err.find(secret) == std::string::npos, r.err);
                CHECK(r.out.find(secret) == std::string::npos);
            }
        }
    }
}

CLI_TEST("no output shows a password, whatever the URL looks like", no_output_shows_a_password)

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

void status_filters_in_the_database(const test::backend_base& db) {
    cli sqlock(db);
    // One run of the job the status asks about, then 1,200 newer runs of
    // another job: a filter applied after reading the newest rows misses it.
    sqlock::job_runner runner(db.open());
    CHECK(runner.run("zzz/target", "r1", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    const std::string runs = db.table("job_runs");
    std::string copy;
    if (db.name() == "postgres")
        copy = "INSERT INTO " + runs + " (job, run_key, status, owner, holder, token, attempts, started_at, finished_at)"
               " SELECT 'aaa/other', 'r' || g, status, owner, holder, token, attempts,"
               " started_at + g * interval '1 second', finished_at FROM " + runs + ", generate_series(1, 1200) g"
               " WHERE job = 'zzz/target'";
    else if (db.name() == "mysql")
        copy = "INSERT INTO " + runs + " (job, run_key, status, owner, holder, token, attempts, started_at, finished_at)"
               " WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1200)"
               " SELECT 'aaa/other', CONCAT('r', n), status, owner, holder, token, attempts,"
               " started_at + INTERVAL n SECOND, finished_at FROM " + runs + ", g WHERE job = 'zzz/target'";
    else
        copy = "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1200)"
               " INSERT INTO " + runs + " (job, run_key, status, owner, holder, token, attempts, started_ms, finished_ms)"
               " SELECT 'aaa/other', 'r' || n, status, owner, holder, token, attempts, started_ms + n * 1000,"
               " finished_ms FROM " + runs + ", g WHERE job = 'zzz/target'";
    auto raw = db.raw();
    if (db.name() == "mysql") raw->exec("SET SESSION max_recursive_iterations = 100000");
    raw->exec(copy);
    auto r = sqlock({"status", "--json", "zzz/"});
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["runs"].size() == 1);
    CHECK(j["runs"][0]["job"] == "zzz/target");
    CHECK(j["truncated"]["runs"] == false);
    // Every section stops at --limit and says so.
    auto holder = db.open();
    std::vector<sqlock::lease> held;
    for (int i = 0; i < 8; ++i) {
        auto l = holder.try_acquire("st/" + std::to_string(i), {.reentrant = false});
        REQUIRE(l);
        held.push_back(std::move(*l));
    }
    r = sqlock({"status", "--limit", "5", "--json"});
    REQUIRE(r.status == 0);
    j = nlohmann::json::parse(r.out);
    CHECK(j["locks"].size() == 5);
    CHECK(j["truncated"]["locks"] == true);
    CHECK(j["runs"].size() == 5);
    CHECK(j["truncated"]["runs"] == true);
    r = sqlock({"status", "--limit", "5"});
    CHECK(r.out.find("HELD LOCKS (5 shown; more not shown: raise --limit)") != std::string::npos);
}

CLI_TEST("status filters by prefix in the database and bounds every section", status_filters_in_the_database)

void status_metrics_count_the_database(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open_quiet();  // no sweeps: the expired row below must stay
    // A key whose name needs every escape of a label value.
    const std::string odd = "mt/a \"quoted\" back\\slash\nline";
    auto a = c.try_acquire(odd);
    REQUIRE(a);
    auto b = c.try_acquire("mt/b", {.mode = sqlock::mode::unique_insert});
    REQUIRE(b);
    std::optional<sqlock::lease> row_locked;
    if (db.row_locks()) {
        row_locked = c.try_acquire("mt/c", {.mode = sqlock::mode::select_for_update});
        REQUIRE(row_locked);
    }
    // A unique_insert lease left to expire, its row kept while the lease object lives.
    auto expired = c.try_acquire("mt/expired", {.mode = sqlock::mode::unique_insert, .lease = 300ms, .auto_renew = false});
    REQUIRE(expired);
    REQUIRE(test::eventually([&] { return !c.inspect("mt/expired").held; }));
    sqlock::job_runner runner(c);
    CHECK(runner.run("mt/job", "r1", [](const sqlock::job_context&) {}).status == sqlock::job_status::ran);
    CHECK(runner.run("mt/job", "r2", [](const sqlock::job_context&) { throw std::runtime_error("no"); }).status ==
          sqlock::job_status::failed);
    std::thread waiting([&] {
        auto w = db.open_quiet();
        try {
            w.acquire(odd, 30s, {.fair = true}).release();
        } catch (const sqlock::error&) {
        }
    });
    REQUIRE(test::eventually([&] { return c.waiters("mt/").size() == 1; }));

    const auto before = c.database_time();
    const auto r = sqlock({"status", "--metrics"});
    const auto after = c.database_time();
    a->release();
    waiting.join();
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    prometheus m;
    REQUIRE_NOTHROW(m = prometheus::parse(r.out));
    for (const auto& [name, type] : m.type) {
        CAPTURE(name);
        CHECK(name.starts_with("sqlock_"));
        CHECK(type == "gauge");
        CHECK(m.help.count(name) == 1);
    }
    const std::int64_t held = db.row_locks() ? 3 : 2;
    CHECK(m.value("sqlock_db_keys_held") == held);
    CHECK(m.sum("sqlock_db_holders") == held);
    CHECK(m.value("sqlock_db_holders", {{"mode", "conditional_update"}}) == 1);
    CHECK(m.value("sqlock_db_holders", {{"mode", "unique_insert"}}) == 1);
    CHECK(m.find("sqlock_db_holders", {{"mode", "select_for_update"}}).size() == (db.row_locks() ? 1u : 0u));
    if (db.row_locks()) CHECK(m.value("sqlock_db_holders", {{"mode", "select_for_update"}}) == 1);
    CHECK(m.sum("sqlock_db_waiters") == 1);
    CHECK(m.value("sqlock_db_waiters", {{"fair", "true"}}) == 1);
    CHECK(m.value("sqlock_db_oldest_wait_seconds") >= 0);
    CHECK(m.value("sqlock_db_expired_rows", {{"table", "locks"}}) == 1);
    CHECK(m.value("sqlock_db_expired_rows", {{"table", "waiters"}}) == 0);
    CHECK(m.value("sqlock_db_job_runs", {{"status", "succeeded"}}) == 1);
    CHECK(m.value("sqlock_db_job_runs", {{"status", "failed"}}) == 1);
    CHECK(m.value("sqlock_db_job_runs", {{"status", "running"}}) == 0);
    // The queue, under its key exactly as given, escapes undone.
    REQUIRE(m.find("sqlock_db_queue_waiters").size() == 1);
    CHECK(m.value("sqlock_db_queue_waiters", {{"key", odd}}) == 1);
    CHECK(m.value("sqlock_db_queue_oldest_wait_seconds", {{"key", odd}}) >= 0);
    // Read at the database clock, between the two readings around it.
    const auto at = std::llround(m.value("sqlock_db_time_seconds") * 1000);
    CHECK(at >= before.time_since_epoch().count());
    CHECK(at <= after.time_since_epoch().count());
    CHECK(m.find("sqlock_db_expired_rows").size() == 2);

    // Nothing held, nobody waiting: zeros, and no queue families at all.
    b->release();
    if (row_locked) row_locked->release();
    expired.reset();
    const auto idle = prometheus::parse(sqlock({"status", "--metrics"}).out);
    CHECK(idle.value("sqlock_db_keys_held") == 0);
    CHECK(idle.sum("sqlock_db_waiters") == 0);
    CHECK(idle.value("sqlock_db_oldest_wait_seconds") == 0);
    CHECK(idle.type.count("sqlock_db_queue_waiters") == 0);
}

CLI_TEST("status --metrics: whole-database gauges in the Prometheus text format", status_metrics_count_the_database)

void status_watch_repeats(const test::backend_base& db) {
    cli sqlock(db);
    auto c = db.open();
    auto held = c.try_acquire("wt/held", {.note = "watched"});
    REQUIRE(held);
    // Two snapshots to a pipe: plain text, a blank line and the timestamp line between them.
    auto watch = sqlock.start({"status", "--watch", "--count", "2", "--interval", "100ms"});
    std::vector<std::string> out;
    while (auto line = watch.read_line(20s)) out.push_back(*line);
    CHECK(watch.wait(10s) == 0);
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < out.size(); ++i) {
        CAPTURE(out[i]);
        CHECK(out[i].find('\x1b') == std::string::npos);  // no terminal codes into a pipe
        if (out[i].starts_with("database time ")) starts.push_back(i);
    }
    REQUIRE(starts.size() == 2);
    CHECK(starts[0] == 0);
    CHECK(out[starts[1] - 1].empty());
    for (auto [from, to] : {std::pair(starts[0], starts[1]), std::pair(starts[1], out.size())}) {
        const auto shown = std::count_if(out.begin() + static_cast<std::ptrdiff_t>(from),
                                         out.begin() + static_cast<std::ptrdiff_t>(to),
                                         [](const std::string& l) { return l.starts_with("wt/held ") && l.find("watched") != std::string::npos; });
        CHECK(shown == 1);
    }
    // Without --count it goes on until a signal: 128 + N, per signal.
    for (int sig : {SIGINT, SIGTERM}) {
        CAPTURE(sig);
        auto endless = sqlock.start({"status", "--watch", "--interval", "100ms"});
        const auto first = endless.read_line(20s);
        REQUIRE(first);
        CHECK(first->starts_with("database time "));
        endless.signal(sig);
        CHECK(endless.wait(20s) == 128 + sig);
    }
    CHECK(c.inspect("wt/held").held);
}

CLI_TEST("status --watch: a snapshot every --interval, --count times or until a signal", status_watch_repeats)

}  // TEST_SUITE("cli")

TEST_SUITE("unit") {

TEST_CASE("the test's Prometheus reader is strict") {
    const auto good = prometheus::parse(
        "# HELP x_total A \\\\ help\\ntext.\n# TYPE x_total counter\nx_total{k=\"a\\\"b\\\\c\\nd\",m=\"\"} 1.5\nx_total 2\n"
        "# TYPE y gauge\ny -3e2\n");
    CHECK(good.help.at("x_total") == "A \\ help\ntext.");
    CHECK(good.value("x_total", {{"k", "a\"b\\c\nd"}}) == 1.5);
    CHECK(good.value("y") == -300);
    for (const char* bad : {
             "x 1\n",                                    // no TYPE
             "x 1\n# TYPE x gauge\n",                    // TYPE after the sample
             "# TYPE x gauge\n# TYPE x gauge\nx 1\n",    // TYPE twice
             "# TYPE x summary\nx 1\n",                  // a type not allowed here
             "# TYPE x gauge\nx 1",                      // no final line feed
             "# TYPE x gauge\n\nx 1\n",                  // an empty line
             "# TYPE x gauge\n# a comment\nx 1\n",       // a comment
             "# TYPE 1x gauge\n1x 1\n",                  // invalid name
             "# TYPE x gauge\nx{1k=\"v\"} 1\n",          // invalid label name
             "# TYPE x gauge\nx{__k=\"v\"} 1\n",        // reserved label name
             "# TYPE x gauge\nx{k=v} 1\n",               // unquoted value
             "# TYPE x gauge\nx{k=\"a\\tb\"} 1\n",     // undefined escape
             "# TYPE x gauge\nx{k=\"v\",k=\"w\"} 1\n",  // label twice
             "# TYPE x gauge\nx{k=\"v\",} 1\n",         // trailing comma
             "# TYPE x gauge\nx 1\nx 2\n",               // the same series twice
             "# TYPE x gauge\nx one\n",                  // not a number
             "# TYPE x gauge\nx  1\n",                   // two spaces
             "# TYPE x gauge\nx 1 1700000000\n",         // a timestamp
             "# HELP x a \\q\n# TYPE x gauge\nx 1\n",  // undefined escape in HELP
             "# TYPE x gauge\n# TYPE y gauge\nx 1\n",    // x's lines not together
         }) {
        CAPTURE(bad);
        CHECK_THROWS_AS(prometheus::parse(bad), std::runtime_error);
    }
}

TEST_CASE("command-line durations") {
    using sqlock::cli::format_duration;
    using sqlock::cli::parse_duration;
    CHECK(parse_duration("250ms") == 250ms);
    CHECK(parse_duration("30s") == 30s);
    CHECK(parse_duration("5m") == 5min);
    CHECK(parse_duration("1h") == 1h);
    CHECK(parse_duration("1h30m") == 90min);
    CHECK(parse_duration("2d1h1m1s1ms") == 2 * 24h + 1h + 1min + 1s + 1ms);
    CHECK(parse_duration("0s") == 0ms);
    for (const char* bad : {"", "10", "5x", "m", "1m1h", "1h1h", "-1s", "1.5s", "1s ", " 1s", "1 s",
                            "99999999999999999999s", "9999999999999999d"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(parse_duration(bad), std::invalid_argument);
    }
    for (std::chrono::milliseconds d : {0ms, 250ms, 1000ms, 5400000ms, 3600001ms, 86400001ms})
        CHECK(parse_duration(format_duration(d)) == d);
    CHECK(format_duration(90min) == "1h30m");
    // The extremes (the duration fuzzer's find: negating the most negative
    // count overflowed, and the old code printed "-").
    CHECK(format_duration(std::chrono::milliseconds::max()) == "106751991167d7h12m55s807ms");
    CHECK(format_duration(std::chrono::milliseconds::min()) == "-106751991167d7h12m55s808ms");
}

}  // TEST_SUITE("unit")
