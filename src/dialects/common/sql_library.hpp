#pragma once
// The SQL embedded from sql/<dialect>/ and migrations/<dialect>/, with the
// table prefix applied.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlock::detail {

struct embedded_file {
    const char* path;  // e.g. "sql/postgres/grant.sql"
    const char* text;
};
extern const embedded_file embedded_files[];
extern const std::size_t embedded_file_count;

struct migration {
    int version;
    std::string name;
    std::string text;  // prefix applied
};

class sql_library {
public:
    // Every "sqlock_" in the dialect's SQL becomes `prefix`.
    sql_library(std::string_view dialect, std::string_view prefix);

    // The statement in sql/<dialect>/<name>.sql, with every {{other}} replaced
    // by sql/<dialect>/other.sql minus its comment lines (so a column list
    // that several statements read, and C++ decodes by position, is written
    // once). Throws std::logic_error if absent.
    const std::string& get(std::string_view name) const;
    // Migrations in version order.
    const std::vector<migration>& migrations() const { return migrations_; }
    int latest_version() const { return migrations_.empty() ? 0 : migrations_.back().version; }
    const std::string& prefix() const { return prefix_; }

private:
    std::string prefix_;
    std::vector<std::pair<std::string, std::string>> statements_;
    std::vector<migration> migrations_;
};

// Replaces every {{name}} in sql with fragment(name) stripped of "--" comment
// lines and trailing newlines. Throws std::logic_error on an unterminated marker.
std::string expand_includes(std::string_view sql,
                            const std::function<std::string_view(std::string_view)>& fragment);

// Replaces every "sqlock_" with prefix.
std::string apply_prefix(std::string_view sql, std::string_view prefix);

// Splits a migration into statements at semicolons that end a line, for
// drivers that take one statement per call. Comment-only pieces are dropped.
std::vector<std::string> split_statements(std::string_view sql);

}  // namespace sqlock::detail
