// Unit tests that need no database: URL parsing, redaction, input checks,
// SQL splitting and prefixing, local wake-up queues.

#include "dialects/common/common.hpp"
#include "dialects/mysql/mysql_url.hpp"
#include "dialects/sqlite/sqlite_url.hpp"
#include "watchdog/schedule.hpp"
#include "dialects/common/sql_library.hpp"
#include "core/grant.hpp"
#include "core/url.hpp"
#include "core/validate.hpp"
#include "dialects/dialect.hpp"
#include "queue/wakeups.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using sqlock::detail::parse_url;
using sqlock::detail::redact_url;

TEST_SUITE("unit") {

TEST_CASE("postgres URLs are handed to libpq as given") {
    for (const char* url : {"postgresql://app:pw@db:5432/app", "postgres://app@/app?host=/var/run/postgresql",
                            "postgresql://%2Fvar%2Frun%2Fpostgresql/app", "postgresql://db/app?sslmode=disable"}) {
        auto u = parse_url(url);
        CHECK(u.scheme == "postgres");
        CHECK(u.raw == url);
    }
    CHECK_THROWS_AS(parse_url("postgresql:app"), sqlock::config_error);
}

TEST_CASE("libpq multi-host URLs are accepted, and their password is masked") {
    const std::string url =
        "postgresql://app:s3cr%40t@10.0.0.1:5432,10.0.0.2:5433/app?target_session_attrs=read-write";
    auto u = parse_url(url);
    CHECK(u.raw == url);
    CHECK(u.secrets == std::vector<std::string>{"s3cr%40t", "s3cr@t"});
    CHECK(redact_url(url) == "postgresql://app:***@10.0.0.1:5432,10.0.0.2:5433/app?target_session_attrs=read-write");
    // Without a user: a port per host, and an '@' in a parameter.
    CHECK_NOTHROW(parse_url("postgresql://h1:5432,h2/app?user=me@corp"));
    CHECK_NOTHROW(parse_url("postgresql://h1,h2:5433/app?user=me@corp&sqlock_pool_mode=transaction"));
    // A password with an unencoded '/' still shows as a port that is not a number.
    CHECK_THROWS_AS(parse_url("postgresql://h1:5432,u:pa/ss@h2/app"), sqlock::config_error);
}

TEST_CASE("mysql URLs name user, password, host, port, database and socket") {
    auto u = sqlock::detail::parse_mysql_url("mysql://app:p%40ss@db.example:3307/orders");
    CHECK(u.user == "app");
    CHECK(u.password == "p@ss");
    CHECK(u.host == "db.example");
    CHECK(u.port == 3307);
    CHECK(u.database == "orders");

    auto s = sqlock::detail::parse_mysql_url("mariadb://app@localhost/orders?socket=/run/mysqld/mysqld.sock");
    CHECK(s.socket == "/run/mysqld/mysqld.sock");
    CHECK(s.password.empty());

    CHECK(sqlock::detail::parse_mysql_url("mysql://app@db/orders").port == 0);
    CHECK_THROWS_AS(sqlock::detail::parse_mysql_url("mysql://app@db:notaport/orders"), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::detail::parse_mysql_url("mysql://app@db:70000/orders"), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::detail::parse_mysql_url("mysql://app@db"), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::detail::parse_mysql_url("mysql://app@db/orders?sslmode=on"), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::detail::parse_mysql_url("mysql://app@db/orders?socket"), sqlock::config_error);
    CHECK_THROWS_AS(parse_url("mysql://app:bad%zzescape@db/orders"), sqlock::config_error);
    CHECK(parse_url("mariadb://app@localhost/orders").scheme == "mysql");
}

TEST_CASE("sqlite URLs take relative and absolute paths") {
    using sqlock::detail::parse_sqlite_path;
    CHECK(parse_sqlite_path("sqlite:locks.db") == "locks.db");
    CHECK(parse_sqlite_path("sqlite:data/locks.db") == "data/locks.db");
    CHECK(parse_sqlite_path("sqlite:/var/app/locks.db") == "/var/app/locks.db");
    CHECK(parse_sqlite_path("sqlite:///var/app/locks.db") == "/var/app/locks.db");
    CHECK(parse_sqlite_path("sqlite://locks.db") == "locks.db");
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:"), sqlock::config_error);
    CHECK_THROWS_AS(parse_sqlite_path("sqlite::memory:"), sqlock::config_error);
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:locks.db?mode=ro"), sqlock::config_error);
    // Percent-escaped, the same names are refused too: an in-memory database,
    // a URI whose parameters (nolock=1) turn off SQLite's file locking, a NUL.
    CHECK(parse_sqlite_path("sqlite:/tmp/my%20locks.db") == "/tmp/my locks.db");
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:%3Amemory%3A"), sqlock::config_error);
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:file:/tmp/locks.db%3Fnolock=1"), sqlock::config_error);
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:%66ile:/tmp/locks.db"), sqlock::config_error);
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:%00"), sqlock::config_error);
    CHECK_THROWS_AS(parse_sqlite_path("sqlite:/tmp/a%00b.db"), sqlock::config_error);
    CHECK(parse_sqlite_path("sqlite:./file:odd.db") == "./file:odd.db");  // a file, named so
}

TEST_CASE("unknown or missing schemes are configuration errors") {
    CHECK_THROWS_AS(parse_url(""), sqlock::config_error);
    CHECK_THROWS_AS(parse_url("locks.db"), sqlock::config_error);
    CHECK_THROWS_AS(parse_url("redis://localhost"), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::client::open("oracle://scott:tiger@db/x"), sqlock::config_error);
}

TEST_CASE("a URL whose password would be misread is refused without showing it") {
    // Each password is unencoded where it must be encoded; a parser (libpq's,
    // or ours before) would take part of it for a host, port, database or
    // parameter, and quote that part in an error.
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
        {"postgresql://u:50%off@h/db", {"50%off", "off"}},
        {"postgresql://u:Zq9/xW7@h/db", {"Zq9", "xW7"}},
        {"postgresql://u:Vb3?Nm6@h/db", {"Vb3", "Nm6"}},
        {"postgresql://u:Kq4#Pz8@h/db", {"Kq4", "Pz8"}},
        {"postgresql://u:Jh5@Lk2@h/db", {"Jh5", "Lk2"}},
        {"postgresql://h/db?password=Tg6%zz", {"Tg6"}},
        {"mysql://u:Kq4#Pz8@h/db", {"Kq4", "Pz8"}},
        {"mysql://u:Zq9/xW7@h:3306/db", {"Zq9", "xW7"}},
        {"mysql://u:Vb3?Nm6@h/db", {"Vb3", "Nm6"}},
        {"mariadb://u:50%off@h/db", {"50%off", "off"}},
        {"postgresql://u:123?456@h/db", {"456"}},
        {"mysql://u:123/456@h/db", {"456"}},
        // A password holding '?' after digits (read as a port) and an '@':
        // the mysql parser took "Xy7" for a parameter and named it.
        {"mysql://u:1?Xy7=Qz8@h/db", {"Xy7", "Qz8"}},
        {"mariadb://u:1?socket=Qz8@h/db", {"Qz8"}},
        // Or '/' twice: the tail went to the database name, past its first segment.
        {"mysql://u:1/Xy7/Qz8@h/db", {"Xy7", "Qz8"}},
        {"postgresql://u:Rt5@Lm3/Xy7/Qz8@h/db", {"Rt5", "Lm3", "Xy7", "Qz8"}},
    };
    for (const auto& [url, secrets] : cases) {
        CAPTURE(url);
        std::string message;
        try {
            parse_url(url);
        } catch (const sqlock::config_error& e) {
            message = e.what();
        }
        REQUIRE_FALSE(message.empty());
        for (const auto& secret : secrets) CHECK_MESSAGE(message.find(secret) == std::string::npos, message);
        const auto redacted = redact_url(url);
        for (const auto& secret : secrets) CHECK_MESSAGE(redacted.find(secret) == std::string::npos, redacted);
    }
    // Encoded, they are fine, and the parts come out right.
    CHECK_NOTHROW(parse_url("mysql://u:Zq9%2FxW7%23%3F%40%25@h:3306/db"));
    auto m = sqlock::detail::parse_mysql_url("mysql://u:Zq9%2FxW7%23%3F%40%25@h:3306/db");
    CHECK(m.password == "Zq9/xW7#?@%");
    CHECK(m.host == "h");
    CHECK(m.port == 3306);
    CHECK_NOTHROW(parse_url("postgresql://u:Zq9%2FxW7%23@h/db"));
    // An '@' in the query, not in a password, is legal (user=name@server).
    CHECK_NOTHROW(parse_url("postgresql://db:5432/app?user=me@corp"));
    CHECK_NOTHROW(parse_url("postgresql:///app?host=/run/postgresql&user=me@corp"));
    // The mysql URL's only parameter, socket, takes an '@' encoded.
    CHECK_NOTHROW(parse_url("mysql://u:p@h/db?socket=/run/my@sock"));
    CHECK_NOTHROW(parse_url("mysql://h/db?socket=/run/my%40sock"));
    CHECK(sqlock::detail::parse_mysql_url("mysql://h/db?socket=/run/my%40sock").socket == "/run/my@sock");
    CHECK_THROWS_AS(parse_url("mysql://h/db?socket=/run/my@sock"), sqlock::config_error);
    // A malformed scheme-less string shows nothing of itself.
    try {
        parse_url("u:Hy7Pw@h/db");
    } catch (const sqlock::config_error& e) {
        CHECK(std::string(e.what()).find("Hy7Pw") == std::string::npos);
    }
}

TEST_CASE("driver messages are scrubbed of every spelling of the password") {
    auto u = parse_url("postgresql://u:a%2Fb@h/db?password=c%40d");
    CHECK(sqlock::detail::scrub("no a%2Fb nor a/b nor c%40d nor c@d here", u.secrets) ==
          "no *** nor *** nor *** nor *** here");
}

TEST_CASE("passwords the URL fuzzer found leaking are hidden") {
    // Each was shown by redact_url or missing from the secrets scrub() hides
    // (tests/fuzz/url_fuzz.cpp found them; libpq reads each as a password).
    CHECK(redact_url("postgresql://db:5432/app?password=p@ss").find("p@ss") == std::string::npos);
    CHECK(redact_url("postgresql://db:5432/app?password=p@ss") == "postgresql://db:5432/app?password=***");
    const auto encoded_name = parse_url("postgresql://db/app?pass%77ord=hunter2");
    CHECK(redact_url("postgresql://db/app?pass%77ord=hunter2").find("hunter2") == std::string::npos);
    CHECK(sqlock::detail::scrub("libpq: hunter2", encoded_name.secrets).find("hunter2") == std::string::npos);
    const auto with_space = parse_url("postgresql://db/app?password=two words");
    CHECK(redact_url("postgresql://db/app?password=two words").find("words") == std::string::npos);
    CHECK(sqlock::detail::scrub("it was two words", with_space.secrets).find("words") == std::string::npos);
    // A password with an unencoded '@' and '/': libpq would take "Kw9" for
    // the host and quote it. Refused, and the message shows none of it.
    try {
        parse_url("postgresql://u:Qz7@Kw9/x@h/db");
        FAIL("expected config_error");
    } catch (const sqlock::config_error& e) {
        const std::string what = e.what();
        CHECK_MESSAGE(what.find("Qz7") == std::string::npos, what);
        CHECK_MESSAGE(what.find("Kw9") == std::string::npos, what);
    }
    CHECK_NOTHROW(parse_url("postgresql://u:Qz7%40Kw9%2Fx@h/db"));
    CHECK_NOTHROW(parse_url("postgresql://u:pw@h/db?user=me@corp"));
}

TEST_CASE("a redacted URL keeps all but its passwords: host, port, database and parameters") {
    CHECK(redact_url("postgresql://db:5432/app?user=me@corp") == "postgresql://db:5432/app?user=me@corp");
    CHECK(redact_url("postgresql://app:pw@db:5432/app?user=me@corp&password=x") ==
          "postgresql://app:***@db:5432/app?user=me@corp&password=***");
    CHECK(redact_url("mysql://app:pw@db:3306/app?socket=/run/my@sock") ==
          "mysql://app:***@db:3306/app?socket=/run/my@sock");
    CHECK(redact_url("postgresql://app@/app?host=/run/pg&user=me@corp") == "postgresql://app@/app?host=/run/pg&user=me@corp");
    // libpq ends the userinfo at the first '@' before any '/', even past a
    // '?': this URL's password is "Pw8", and it is masked.
    REQUIRE_NOTHROW(parse_url("postgresql://h?x=u:Pw8@y"));
    CHECK(redact_url("postgresql://h?x=u:Pw8@y") == "postgresql://h?x=u:***@y");
}

TEST_CASE("error messages never show a password") {
    CHECK(redact_url("postgresql://app:hunter2@db/app") == "postgresql://app:***@db/app");
    CHECK(redact_url("mysql://app:hunter2@db:3306/x") == "mysql://app:***@db:3306/x");
    CHECK(redact_url("postgresql://db/app?user=x&password=hunter2&sslmode=off").find("hunter2") == std::string::npos);
    CHECK(redact_url("postgresql://app@db/app") == "postgresql://app@db/app");
    try {
        sqlock::client::open("oracle://scott:hunter2@db/x");
        FAIL("expected config_error");
    } catch (const sqlock::config_error& e) {
        CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
    }
}

TEST_CASE("keys are 1 to 255 bytes of UTF-8 without NUL") {
    using sqlock::detail::validate_key;
    CHECK_NOTHROW(validate_key("a"));
    CHECK_NOTHROW(validate_key(std::string(255, 'k')));
    CHECK_NOTHROW(validate_key("billing/close-day 🔒 \"quoted\"; 50% _x\\y\nz"));
    CHECK_THROWS_AS(validate_key(""), sqlock::config_error);
    CHECK_THROWS_AS(validate_key(std::string(256, 'k')), sqlock::config_error);
    CHECK_THROWS_AS(validate_key(std::string("a\0b", 3)), sqlock::config_error);
    CHECK_THROWS_AS(validate_key("\xff"), sqlock::config_error);            // not UTF-8
    CHECK_THROWS_AS(validate_key("\xc0\xaf"), sqlock::config_error);        // overlong '/'
    CHECK_THROWS_AS(validate_key("\xed\xa0\x80"), sqlock::config_error);    // surrogate
    CHECK_THROWS_AS(validate_key("\xf0\x9f\x94"), sqlock::config_error);    // truncated emoji
    CHECK_THROWS_AS(validate_key("\xf4\x90\x80\x80"), sqlock::config_error);  // above U+10FFFF
    try {
        validate_key(std::string(300, 'k'));
    } catch (const sqlock::config_error& e) {
        CHECK(std::string(e.what()).find("255") != std::string::npos);
    }
}

TEST_CASE("a safety margin that leaves no room for a renewal is refused") {
    using sqlock::detail::validate_lock_options;
    // Lost at lease - margin after the last renewal; the next renewal is sent
    // one interval after it: margin + interval must stay below the lease.
    CHECK_THROWS_AS(validate_lock_options({.lease = 3s, .safety_margin = 2s, .renew_interval = 1s}),
                    sqlock::config_error);
    CHECK_THROWS_AS(validate_lock_options({.lease = 3s, .safety_margin = 2100ms}), sqlock::config_error);  // + 1 s
    CHECK_NOTHROW(validate_lock_options({.lease = 3s, .safety_margin = 1900ms}));
    CHECK_NOTHROW(validate_lock_options({.lease = 3s, .safety_margin = 2s, .auto_renew = false}));
    CHECK_NOTHROW(validate_lock_options({.lease = 3s, .safety_margin = 1s, .renew_interval = 1500ms}));
}

TEST_CASE("one maximum duration for every backend, named in the message") {
    using sqlock::detail::validate_lock_options;
    CHECK_NOTHROW(validate_lock_options({.lease = sqlock::max_duration}));
    try {
        validate_lock_options({.lease = sqlock::max_duration + 1ms});
        FAIL("expected config_error");
    } catch (const sqlock::config_error& e) {
        CHECK(std::string(e.what()).find("max_duration") != std::string::npos);
    }
    sqlock::client_options o;
    o.statement_timeout = std::chrono::hours(24 * 30);
    CHECK_THROWS_AS(sqlock::detail::validate_client_options(o), sqlock::config_error);
    o = {};
    o.row_lock_timeout = std::chrono::milliseconds::max();
    CHECK_THROWS_AS(sqlock::detail::validate_client_options(o), sqlock::config_error);
    // Below the maximum, PostgreSQL's 32-bit millisecond settings hold it.
    CHECK(sqlock::max_duration.count() < 2147483647);
}

TEST_CASE("deadline arithmetic saturates instead of overflowing") {
    using sqlock::detail::ms_to_ns;
    using sqlock::detail::saturating_add;
    constexpr auto max = std::numeric_limits<std::int64_t>::max();
    CHECK(ms_to_ns(std::chrono::milliseconds::max().count()) == max);
    CHECK(saturating_add(max - 5, 10) == max);
    CHECK(saturating_add(7, 5) == 12);
    CHECK(ms_to_ns(3) == 3'000'000);
}

TEST_CASE("a wait until a far time point of any clock and unit waits for ever, without overflow") {
    // try_lock_until's time left was t - now in their common type: an
    // hours-based time point converted to nanoseconds overflowed (UB; a
    // sanitizer build stops there), and the wait came out as a single try.
    using namespace std::chrono;
    using sqlock::detail::wait_until;
    CHECK(wait_until(time_point<system_clock, hours>::max()) == sqlock::wait_forever);
    CHECK(wait_until(time_point<steady_clock, hours>::max()) == sqlock::wait_forever);
    CHECK(wait_until(time_point<system_clock, hours>::min()) == milliseconds::zero());
    // 400 years ahead, past what nanoseconds since the epoch can hold: a long wait, not none.
    const auto far = time_point_cast<hours>(system_clock::now()) + hours(24 * 366 * 400);
    CHECK(wait_until(far) > duration_cast<milliseconds>(hours(24 * 365 * 399)));
    // Near time points keep their millisecond.
    const auto soon = wait_until(steady_clock::now() + 250ms);
    CHECK(soon > 200ms);
    CHECK(soon <= 250ms);
}

TEST_CASE("lock options and timeouts are checked") {
    using sqlock::detail::validate_lock_options;
    CHECK_NOTHROW(validate_lock_options({}));
    CHECK_THROWS_AS(validate_lock_options({.lease = 0ms}), sqlock::config_error);
    CHECK_THROWS_AS(validate_lock_options({.lease = -5s}), sqlock::config_error);
    CHECK_THROWS_AS(validate_lock_options({.lease = 1s, .safety_margin = 2s}), sqlock::config_error);
    CHECK_THROWS_AS(validate_lock_options({.note = std::string(1025, 'n')}), sqlock::config_error);
    CHECK_THROWS_AS(validate_lock_options({.note = "\xff"}), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::detail::validate_timeout(-1ms), sqlock::config_error);
    CHECK_NOTHROW(sqlock::detail::validate_timeout(0ms));
}

TEST_CASE("table prefixes must be lower-case identifiers") {
    using sqlock::detail::validate_client_options;
    auto with = [](std::string p) {
        sqlock::client_options o;
        o.table_prefix = std::move(p);
        return o;
    };
    CHECK_NOTHROW(validate_client_options(with("sqlock_")));
    CHECK_NOTHROW(validate_client_options(with("app_locks_")));
    CHECK_THROWS_AS(validate_client_options(with("")), sqlock::config_error);
    CHECK_THROWS_AS(validate_client_options(with("Locks_")), sqlock::config_error);
    CHECK_THROWS_AS(validate_client_options(with("1locks")), sqlock::config_error);
    CHECK_THROWS_AS(validate_client_options(with("x; DROP TABLE users; --")), sqlock::config_error);
    CHECK_THROWS_AS(validate_client_options(with("a\"b")), sqlock::config_error);
    CHECK_THROWS_AS(validate_client_options(with(std::string(41, 'a'))), sqlock::config_error);
    CHECK_THROWS_AS(sqlock::client::open("sqlite:/tmp/never-created.db", with("bad-prefix")), sqlock::config_error);
}

TEST_CASE("migrations split into statements at line-ending semicolons") {
    auto parts = sqlock::detail::split_statements(
        "-- comment;\nCREATE TABLE a (x int);\n\nINSERT INTO a VALUES (1)\n  ;\n-- trailing\n");
    REQUIRE(parts.size() == 2);
    CHECK(parts[0].find("CREATE TABLE a") != std::string::npos);
    CHECK(parts[1].find("INSERT INTO a") != std::string::npos);
}

TEST_CASE("a DELIMITER line keeps a stored function's body in one statement") {
    auto parts = sqlock::detail::split_statements(
        "DROP FUNCTION IF EXISTS f;\nDELIMITER //\nCREATE FUNCTION f() RETURNS INT\nBEGIN\n"
        "  DECLARE x INT;\n  RETURN 1;\nEND//\nDELIMITER ;\nINSERT INTO a VALUES (1);\n");
    REQUIRE(parts.size() == 3);
    CHECK(parts[0].starts_with("DROP FUNCTION"));
    CHECK(parts[1].find("DECLARE x INT;\n  RETURN 1;\nEND") != std::string::npos);
    CHECK(parts[1].find("//") == std::string::npos);
    CHECK(parts[2].starts_with("INSERT INTO a"));
}

TEST_CASE("the table prefix replaces sqlock_ everywhere in the embedded SQL") {
    CHECK(sqlock::detail::apply_prefix("SELECT * FROM sqlock_locks JOIN sqlock_fences", "app_") ==
          "SELECT * FROM app_locks JOIN app_fences");
    sqlock::detail::sql_library lib("postgres", "zz_");
    CHECK(lib.latest_version() >= 1);
    CHECK(lib.get("grant").find("sqlock_") == std::string::npos);
    CHECK(lib.get("grant").find("zz_locks") != std::string::npos);
    for (const char* dialect : {"postgres", "mysql", "sqlite"}) {
        sqlock::detail::sql_library l(dialect, "sqlock_");
        CHECK(l.migrations().front().version == 1);
    }
}

TEST_CASE("an embedded statement includes a fragment by {{name}}, without the fragment's comments") {
    auto fragment = [](std::string_view name) -> std::string_view {
        if (name == "cols") return "-- the columns\n  a, b,\n  c\n\n";
        throw std::logic_error("unknown fragment");
    };
    CHECK(sqlock::detail::expand_includes("SELECT {{cols}}\n  FROM t", fragment) == "SELECT   a, b,\n  c\n  FROM t");
    CHECK(sqlock::detail::expand_includes("SELECT 1", fragment) == "SELECT 1");
    CHECK_THROWS_AS(sqlock::detail::expand_includes("SELECT {{cols", fragment), std::logic_error);
    CHECK_THROWS_AS(sqlock::detail::expand_includes("SELECT {{nope}}", fragment), std::logic_error);
    // Every dialect's ledger statements read the one column list, prefixed.
    for (const char* dialect : {"postgres", "mysql", "sqlite"}) {
        sqlock::detail::sql_library l(dialect, "zz_");
        for (const char* name : {"job_row", "job_lock", "job_list"}) {
            CAPTURE(dialect);
            CAPTURE(name);
            const std::string& sql = l.get(name);
            CHECK(sql.find("{{") == std::string::npos);
            CHECK(sql.find("r.status, r.owner, r.holder, r.token, r.attempts,") != std::string::npos);
            CHECK(sql.find("the order read_job_row") == std::string::npos);
        }
    }
}

TEST_CASE("a forked child draws owner ids and a holder description of its own") {
    // Ids are drawn from the kernel 16 at a time and kept per thread; a child
    // of fork() must not hand out the ones its parent will.
    const std::string before = sqlock::detail::new_owner_id();  // the pool is filled now
    const std::string parent_holder = sqlock::detail::holder_description();
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const std::string line = sqlock::detail::new_owner_id() + " " + sqlock::detail::holder_description() + "\n";
        const bool ok = ::write(fds[1], line.data(), line.size()) == static_cast<ssize_t>(line.size());
        ::_exit(ok ? 0 : 1);
    }
    ::close(fds[1]);
    std::string line;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) line.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The parent's next ids: all 16 of a batch, so that the check holds
    // wherever in its batch the parent was when it forked.
    std::vector<std::string> mine;
    for (int i = 0; i < 16; ++i) mine.push_back(sqlock::detail::new_owner_id());
    const auto space = line.find(' ');
    REQUIRE(space != std::string::npos);
    const std::string child_id = line.substr(0, space);
    const std::string child_holder = line.substr(space + 1, line.size() - space - 2);
    CHECK(child_id.size() == 32);
    CHECK(std::find(mine.begin(), mine.end(), child_id) == mine.end());
    CHECK(child_id != before);
    CHECK(std::find(mine.begin(), mine.end(), before) == mine.end());
    CHECK(child_holder != parent_holder);
    CHECK(child_holder.find(":" + std::to_string(pid) + ":") != std::string::npos);
}

TEST_CASE("waiters for one key in two databases are in two local queues, rung by their own releases") {
    // A process's blocking acquires queue locally per key so that a release
    // wakes only the waiter its database will let in. Keyed by the key alone,
    // the queue mixed clients of different databases (or table prefixes):
    // their tickets come from different waiter tables, and a release in one
    // rang the head of the mixed queue, a waiter of the other database, while
    // its own waiter, not the head, slept until its slowest poll (1 s) with
    // the key free.
    namespace wakeups = sqlock::detail::wakeups;
    const std::string a = "sqlite\nsqlock_\n/data/a.db", b = "sqlite\nsqlock_\n/data/b.db";
    const std::string a_longer = a + "2";  // starts with a's string: still other tables
    wakeups::spot other, mine, behind, longer;
    other.place(b, "k", 'X', false, 0, 1);  // first to queue, and ticket 1 of its own table
    mine.place(a, "k", 'X', false, 0, 1);
    behind.place(a, "k", 'X', false, 0, 2);
    longer.place(a_longer, "k", 'X', false, 0, 1);
    CHECK(mine.heads());
    CHECK(other.heads());
    CHECK(longer.heads());
    CHECK_FALSE(behind.heads());
    const auto other_rings = other.rings(), mine_rings = mine.rings(), behind_rings = behind.rings(),
               longer_rings = longer.rings();
    wakeups::notify(a, "k");  // a release of k in a
    CHECK(mine.rings() == mine_rings + 1);
    CHECK(behind.rings() == behind_rings);
    CHECK(other.rings() == other_rings);
    CHECK(longer.rings() == longer_rings);
    wakeups::notify_heads(a);  // a's database rang this process
    CHECK(mine.rings() == mine_rings + 2);
    CHECK(other.rings() == other_rings);
    CHECK(longer.rings() == longer_rings);
    wakeups::notify_all(b);  // b's listener reconnected
    CHECK(other.rings() == other_rings + 1);
    CHECK(mine.rings() == mine_rings + 2);
    CHECK(behind.rings() == behind_rings);
    CHECK(longer.rings() == longer_rings);
    mine.leave(false);  // a timeout: the next of a's waiters heads a's queue and is rung
    CHECK(behind.heads());
    CHECK(behind.rings() == behind_rings + 1);
    CHECK(other.rings() == other_rings + 1);
}

TEST_CASE("a dialect names its tables by backend, prefix and place, never by a password") {
    using sqlock::detail::dialect_context;
    namespace fs = std::filesystem;
    // The dialect keeps a reference to its context: each lives beside its own.
    auto tables_of = [](const std::string& url, const std::string& prefix) {
        dialect_context ctx;
        ctx.url = url;
        ctx.redacted_url = redact_url(url);
        ctx.options.table_prefix = prefix;
        return sqlock::detail::make_dialect(parse_url(url).scheme, ctx)->tables();
    };
    const fs::path dir = fs::temp_directory_path() / ("sqlock-tables-" + std::to_string(::getpid()));
    fs::create_directories(dir / "sub");
    const std::string file = (dir / "locks.db").string();
    CHECK(tables_of("sqlite:" + file, "sqlock_") ==
          tables_of("sqlite:" + (dir / "sub" / ".." / "locks.db").string(), "sqlock_"));
    CHECK(tables_of("sqlite:" + file, "sqlock_") != tables_of("sqlite:" + file, "other_"));
    CHECK(tables_of("sqlite:" + file, "sqlock_") != tables_of("sqlite:" + (dir / "sub" / "locks.db").string(), "sqlock_"));
    const auto here = fs::current_path();
    fs::current_path(dir);
    const std::string relative = tables_of("sqlite:locks.db", "sqlock_");
    fs::current_path(here);
    CHECK(relative == tables_of("sqlite:" + file, "sqlock_"));
    CHECK(relative.find(fs::weakly_canonical(file).string()) != std::string::npos);
    const std::string pg = tables_of("postgresql://app:s3cret@db.example:5432/app", "sqlock_");
    const std::string my = tables_of("mysql://app:s3cret@db.example:3306/app", "sqlock_");
    CHECK(pg != my);
    CHECK(pg.find("s3cret") == std::string::npos);
    CHECK(my.find("s3cret") == std::string::npos);
    CHECK(pg.find("db.example") != std::string::npos);
    CHECK(pg != tables_of("postgresql://app:s3cret@db.example:5432/other", "sqlock_"));
    // An '@' in the query is no userinfo: the database, host and port stay
    // in the name, where masking them made two databases one.
    CHECK(tables_of("postgresql://db:5432/app?user=me@corp", "sqlock_") !=
          tables_of("postgresql://db:5432/other?user=me@corp", "sqlock_"));
    CHECK(tables_of("postgresql://db:5432/app?user=me@corp", "sqlock_") !=
          tables_of("postgresql://db:5433/app?user=me@corp", "sqlock_"));
    CHECK(tables_of("postgresql://app:s3cret@db:5432/app?user=me@corp", "sqlock_") !=
          tables_of("postgresql://app:s3cret@db:5432/other?user=me@corp", "sqlock_"));
    CHECK(tables_of("postgresql://app:s3cret@db:5432/app?user=me@corp", "sqlock_").find("s3cret") ==
          std::string::npos);
    fs::remove_all(dir);
}

}  // TEST_SUITE
