// The helpers every `sqlock` command shares (command.hpp): duration
// options, which database and durability, opening the client, and how a
// holder and PROGRAM are named in messages.

#include "cli/command.hpp"
#include "cli/duration.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sqlock::cli {
namespace {

constexpr std::string_view default_url = "sqlite:sqlock.db";

}  // namespace

std::string resolve_url(const settings& s) {
    // An empty URL is a variable that was meant to hold one (--url "$DB_URL"
    // with DB_URL unset): falling back would lock a file of each host's own
    // instead of the fleet's database. Only an absent --url and an unset
    // SQLOCK_URL mean the default.
    if (s.url_given) {
        if (s.url.empty()) usage(empty_url_message);
        return s.url;
    }
    if (const char* env = std::getenv("SQLOCK_URL")) {
        if (!*env) usage("SQLOCK_URL is set but empty: give it the database URL, or unset it to use ./sqlock.db");
        return env;
    }
    return std::string(default_url);
}

std::chrono::milliseconds duration_option(const std::string& name, const std::string& text) {
    try {
        return parse_duration(text);
    } catch (const std::invalid_argument& e) {
        usage(name + ": " + e.what());
    }
}

sqlock::durability resolve_durability(const settings& s) {
    std::string text = s.durability, from = "--durability";
    if (const char* env = std::getenv("SQLOCK_DURABILITY"); text.empty() && env && *env) {
        text = env;
        from = "SQLOCK_DURABILITY";
    }
    if (text.empty() || text == "strict") return durability::strict;
    if (text == "relaxed") return durability::relaxed;
    usage(from + ": '" + text + "' is not a durability; use strict or relaxed");
}

client open_client(const settings& s, spdlog::level::level_enum level, bool sweeps) {
    // Library messages go to stderr as "sqlock: ..." lines; `run` keeps only
    // errors so that its own one-line verdict is what people read.
    auto log = std::make_shared<spdlog::logger>("sqlock", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    log->set_pattern("sqlock: %v");
    log->set_level(s.verbose ? spdlog::level::debug : level);
    client_options options{.pool_size = 2, .logger = std::move(log)};
    options.sweep = sweeps;
    // A short-lived command never deletes job-ledger rows: an application on
    // the same tables may keep them longer than the default 30 days, and the
    // shortest retention of any sweeper wins (a `--once-per 60d` row swept
    // on day 30 would let the job run twice in its period).
    options.job_retention = std::chrono::milliseconds::zero();
    if (!s.table_prefix.empty()) options.table_prefix = s.table_prefix;
    else if (const char* env = std::getenv("SQLOCK_TABLE_PREFIX"); env && *env) options.table_prefix = env;
    options.durability = s.commits;
    return client::open(resolve_url(s), options);
}

void print(std::string_view text) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
        throw exit_with{exit_status::io_error, std::string("could not write standard output: ") + std::strerror(errno)};
}

std::string describe_holder(const lock_info& info) {
    std::string out = info.holder.empty() ? "a " + info.mode + " holder" : info.holder;
    out += " (token " + std::to_string(info.token);
    if (info.expires_in.count() > 0) out += ", " + format_duration(info.expires_in) + " left";
    return out + ")";
}

std::string program_name(const settings& s) { return s.program.empty() ? "PROGRAM" : s.program.front(); }

}  // namespace sqlock::cli
