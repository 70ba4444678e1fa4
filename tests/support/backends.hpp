#pragma once
// Test fixtures: one per backend, each a fresh schema under a unique table
// prefix (or a fresh SQLite file), against real servers started by
// scripts/test-servers.sh. Never a mock.

#include <sqlock/sqlock.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace test {

std::string random_hex(std::size_t n);
std::string env_or_throw(const char* name);

// Runs SQL straight through the driver, behind sqlock's back.
class raw_connection {
public:
    virtual ~raw_connection() = default;
    virtual void exec(const std::string& sql) = 0;
    // First column of the first row as an integer (0 when no row).
    virtual std::int64_t scalar(const std::string& sql) = 0;
    // Every row, every column as text (NULL as "").
    virtual std::vector<std::vector<std::string>> rows(const std::string& sql) = 0;
    // An application transaction (SQLite: BEGIN IMMEDIATE); exec and scalar
    // run inside it until commit or rollback.
    virtual void begin() = 0;
    // sqlock::<backend>::fence on the open transaction.
    virtual void fence(const sqlock::lease& held) = 0;
    virtual void commit() = 0;
    virtual void rollback() = 0;
};

// A raw connection to the database of a sqlock URL. A non-zero io_bound
// bounds connecting and every read and write (MySQL: read/write timeouts;
// PostgreSQL: keepalives and TCP_USER_TIMEOUT; SQLite: the busy timeout), so
// that a partitioned or frozen server fails a call instead of hanging it.
std::unique_ptr<raw_connection> raw_connection_for(const std::string& url,
                                                   std::chrono::seconds io_bound = std::chrono::seconds(0));

struct backend_base {
    std::string prefix = "t" + random_hex(10) + "_";
    sqlock::client_options options() const {
        sqlock::client_options o;
        o.table_prefix = prefix;
        return o;
    }
    // options() with short bounds, for tests that stop the server.
    sqlock::client_options options(std::chrono::milliseconds connect_timeout,
                                   std::chrono::milliseconds statement_timeout) const {
        auto o = options();
        o.connect_timeout = connect_timeout;
        o.statement_timeout = statement_timeout;
        return o;
    }
    // The prefixed table name, e.g. table("locks").
    std::string table(const std::string& name) const { return prefix + name; }
    sqlock::client open() const;
    // A client with no background sweeps, for tests that count statements.
    sqlock::client open_quiet() const;
    virtual std::string url() const = 0;
    virtual std::string name() const = 0;
    virtual bool row_locks() const = 0;
    virtual std::unique_ptr<raw_connection> raw() const = 0;
    virtual ~backend_base() = default;
    void migrate() const;
};

struct sqlite_db : backend_base {
    sqlite_db();
    ~sqlite_db() override;
    std::string url() const override { return "sqlite:" + file.string(); }
    std::string name() const override { return "sqlite"; }
    bool row_locks() const override { return false; }
    std::unique_ptr<raw_connection> raw() const override;
    std::filesystem::path dir, file;
};

struct postgres_db : backend_base {
    postgres_db();
    std::string url() const override { return url_; }
    std::string name() const override { return "postgres"; }
    // Not through a transaction pool (the contract suite through PgBouncer, scripts/ha.sh).
    bool row_locks() const override { return url_.find("sqlock_pool_mode=transaction") == std::string::npos; }
    std::unique_ptr<raw_connection> raw() const override;
    std::string url_;
};

struct mysql_db : backend_base {
    mysql_db();
    std::string url() const override { return url_; }
    std::string name() const override { return "mysql"; }
    bool row_locks() const override { return true; }
    std::unique_ptr<raw_connection> raw() const override;
    std::string url_;
};

// Runs scripts/test-servers.sh with the given words against the test servers.
void servers(const std::string& words);

}  // namespace test
