// `sqlock migrate` (create or upgrade the tables, or print their SQL) and
// `sqlock release --force` (the break-glass release, fencing the holder off):
// the commands that change sqlock's tables outside a run.

#include "cli/command.hpp"

#include <sqlock/sqlock.hpp>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace sqlock::cli {
namespace {

std::string who_am_i() {
    const char* user = std::getenv("SUDO_USER");
    if (!user || !*user) user = std::getenv("USER");
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(user && *user ? user : "uid " + std::to_string(::getuid())) + "@" + host + " (sqlock pid " +
           std::to_string(::getpid()) + ")";
}

}  // namespace

int command_migrate(const settings& s) {
    auto db = open_client(s, spdlog::level::warn);
    if (s.print_sql) {
        print(db.migration_sql());
        return 0;
    }
    const int before = db.schema_version();
    db.migrate();
    const int after = db.schema_version();
    print(before == after ? "schema is up to date (version " + std::to_string(after) + ")\n"
                          : "migrated from schema version " + std::to_string(before) + " to " + std::to_string(after) +
                                "\n");
    return 0;
}

int command_release(const settings& s) {
    if (!s.force)
        usage("release takes a lock from whoever holds it; say so with --force: sqlock release --force KEY");
    auto db = open_client(s, spdlog::level::warn);
    const auto before = with_schema(db, [&] { return db.inspect(s.key); });
    const auto token = db.force_release(s.key, who_am_i());
    if (token == 0) {
        print("'" + s.key + "' was never granted: nothing to release\n");
        return 0;
    }
    if (before.held)
        print("released '" + s.key + "': " + describe_holder(before) +
              " is fenced off; the next holder gets a token above " + std::to_string(token) + "\n");
    else
        print("'" + s.key + "' was not held; its token is now " + std::to_string(token) + "\n");
    return 0;
}

}  // namespace sqlock::cli
