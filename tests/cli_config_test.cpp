// The `sqlock` command line, black-box: its setup and its refusals against
// each backend — `migrate`, a missing schema or an unreachable database (exit
// 69), bad input (exit 64, before PROGRAM or the database), --durability, and
// no output that shows a password; and the command line's durations.

#include "support/cli.hpp"
#include "support/commit_probe.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include "cli/duration.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using test::cli;

TEST_SUITE("cli") {

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
    // Strict is the default, and --durability wins over the environment:
    // each run's grant (lock row and fence row) waits for the disk, and only
    // its release (one lock row) does not (see sqlock::durability).
    const auto before = probe.writes();
    const auto relaxed_before = probe.writes_with(probe.relaxed());
    const auto relaxed_locks_before = probe.writes_with(probe.relaxed(), "locks");
    CHECK(sqlock({"run", "k/dur", "--", "true"}, unset).status == 0);
    CHECK(sqlock({"--durability", "strict", "run", "k/dur", "--", "true"}, {"SQLOCK_DURABILITY=relaxed"}).status == 0);
    CHECK(probe.writes() == before + 6);
    CHECK(probe.writes_with(probe.strict()) == 4);
    CHECK(probe.writes_with(probe.relaxed()) - relaxed_before == 2);
    CHECK(probe.writes_with(probe.relaxed(), "locks") - relaxed_locks_before == 2);
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

TEST_CASE("an empty --url or SQLOCK_URL is exit 64, not the SQLite file ./sqlock.db") {
    // A script's `--url "$DB_URL"` with DB_URL unset, or `SQLOCK_URL=$DB_URL`:
    // falling back to the default would lock a file of each host's own.
    test::temp_dir dir;
    const std::string other = "sqlite:" + (dir.path / "other.db").string();
    // sqlock in DIR (whose ./sqlock.db is the default), with SQLOCK_URL as
    // given; PROGRAM creates DIR/ran.
    auto sqlock_in_dir = [&](const std::string& env_url, std::vector<std::string> args) {
        std::vector<std::string> argv{"sh", "-c", "cd \"$1\" && shift && exec \"$0\" \"$@\" 2>err", SQLOCK_CLI,
                                      dir.path.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        const int status = test::child(argv, {"SQLOCK_URL=" + env_url}).wait();
        return std::pair(status, test::slurp(dir.path / "err"));
    };
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
        {other, {"--url", "", "run", "k", "--", "touch", "ran"}},
        {other, {"--url=", "run", "k", "--", "touch", "ran"}},
        {other, {"run", "k", "--url", "", "--", "touch", "ran"}},
        {other, {"run", "--url=", "sqlite:x.db", "k", "--", "touch", "ran"}},  // CLI11 would take the next argument
        {"", {"run", "k", "--", "touch", "ran"}},
        {"", {"status"}},
    };
    for (const auto& [env_url, args] : cases) {
        std::string shown = "SQLOCK_URL=" + env_url;
        for (const auto& a : args) shown += " [" + a + "]";
        CAPTURE(shown);
        const auto [status, err] = sqlock_in_dir(env_url, args);
        CHECK(status == 64);
        CHECK(err.find(env_url.empty() ? "SQLOCK_URL is set but empty" : "--url is empty") != std::string::npos);
        CHECK(std::count(err.begin(), err.end(), '\n') == 1);
        CHECK_FALSE(std::filesystem::exists(dir.path / "ran"));
        CHECK_FALSE(std::filesystem::exists(dir.path / "sqlock.db"));
        CHECK_FALSE(std::filesystem::exists(dir.path / "other.db"));
        CHECK_FALSE(std::filesystem::exists(dir.path / "x.db"));
    }
    // A URL given either way still works.
    CHECK(sqlock_in_dir(other, {"run", "k", "--", "touch", "ran"}).first == 0);
    CHECK(std::filesystem::exists(dir.path / "ran"));
    CHECK_FALSE(std::filesystem::exists(dir.path / "sqlock.db"));
}

}  // TEST_SUITE("cli")

TEST_SUITE("unit") {

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
