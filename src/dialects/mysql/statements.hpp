#pragma once
// Connector/C++ 1.1 prepared statements for the MySQL dialect: a per-
// connection cache of them, statements generated for n rows of a batch, and
// binding and reading helpers. Values are only ever bound, never written into
// SQL text.

#include "dialects/common/sql_library.hpp"

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace sqlock::detail {

// Binds the arguments to placeholders 1, 2, ... in order.
void bind_one(sql::PreparedStatement& ps, unsigned i, std::string_view v);
void bind_one(sql::PreparedStatement& ps, unsigned i, std::int64_t v);
void bind_one(sql::PreparedStatement& ps, unsigned i, int v);
void bind_one(sql::PreparedStatement& ps, unsigned i, bool v);
template <class... Args>
void bind_all(sql::PreparedStatement& ps, const Args&... args) {
    unsigned i = 1;
    (bind_one(ps, i++, args), ...);
}

// A CALL answers with its rows and then a status: read past both, or the
// connection is out of sync for the next statement.
void drain(sql::PreparedStatement& ps);

// A result row read by column index (from 0), NULL as "" or 0.
struct my_row {
    sql::ResultSet& rs;
    std::string text(int i) const;
    std::int64_t integer(int i) const;
    bool null(int i) const { return rs.isNull(static_cast<unsigned>(i + 1)); }
};

class statement_cache {
public:
    statement_cache(sql::Connection& conn, const sql_library& sql) : conn_(conn), sql_(sql) {}

    // The statement sql/mysql/<name>.sql, prepared once per connection.
    sql::PreparedStatement& prepared(const std::string& name);

    // A marker in a statement's text, replaced by `group` repeated n times
    // with `separator` between the copies (placeholders only).
    struct repeat {
        const char* marker;
        const char* group;
        const char* separator;
    };
    // The statement with each marker expanded for n rows. Cached per (name, n).
    sql::PreparedStatement& generated(const std::string& name, std::size_t n, std::initializer_list<repeat> markers);

    // Forgets every statement (after a migration changed the schema).
    void clear() { prepared_.clear(); }

private:
    sql::Connection& conn_;
    const sql_library& sql_;
    std::map<std::string, std::unique_ptr<sql::PreparedStatement>> prepared_;
    int generated_count_ = 0;
};

}  // namespace sqlock::detail
