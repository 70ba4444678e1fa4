#include "support/backends.hpp"
#include "support/helpers.hpp"

#include "core/url.hpp"

#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <pqxx/pqxx>
#include <sqlite3.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <mutex>

namespace test {

std::string random_hex(std::size_t n) {
    static std::mutex mu;
    static std::mt19937_64 rng(std::random_device{}());
    std::lock_guard lock(mu);
    static constexpr char hex[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += hex[rng() % 16];
    return s;
}

std::string env_or_throw(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v)
        throw std::runtime_error(std::string(name) +
                                 " is not set: run the suite through scripts/test.sh, which starts the servers");
    return v;
}

sqlock::client backend_base::open() const { return sqlock::client::open(url(), options()); }

sqlock::client backend_base::open_quiet() const {
    auto o = options();
    o.sweep = false;
    return sqlock::client::open(url(), o);
}

void backend_base::migrate() const { open().migrate(); }

sqlite_db::sqlite_db() {
    dir = std::filesystem::temp_directory_path() / ("sqlock-test-" + random_hex(12));
    std::filesystem::create_directories(dir);
    file = dir / "locks.db";
    migrate();
}

sqlite_db::~sqlite_db() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

postgres_db::postgres_db() : url_(env_or_throw("SQLOCK_TEST_POSTGRES_URL")) { migrate(); }

mysql_db::mysql_db() : url_(env_or_throw("SQLOCK_TEST_MYSQL_URL")) { migrate(); }

namespace {

class sqlite_raw : public raw_connection {
public:
    explicit sqlite_raw(const std::string& file) {
        if (sqlite3_open(file.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite open failed");
        sqlite3_busy_timeout(db_, 10000);
    }
    ~sqlite_raw() override { sqlite3_close(db_); }
    void exec(const std::string& sql) override {
        char* err = nullptr;
        if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
            std::string msg = err ? err : "?";
            sqlite3_free(err);
            throw std::runtime_error("sqlite: " + msg);
        }
    }
    std::int64_t scalar(const std::string& sql) override {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
            throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
        std::int64_t v = 0;
        if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
    }

private:
    sqlite3* db_ = nullptr;
};

class pg_raw : public raw_connection {
public:
    explicit pg_raw(const std::string& url) : conn_(url) {}
    void exec(const std::string& sql) override {
        pqxx::nontransaction tx(conn_);
        tx.exec(sql);
    }
    std::int64_t scalar(const std::string& sql) override {
        pqxx::nontransaction tx(conn_);
        auto r = tx.exec(sql);
        return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<std::int64_t>();
    }

private:
    pqxx::connection conn_;
};

class my_raw : public raw_connection {
public:
    explicit my_raw(const std::string& url) {
        // The library's own URL parser (std::regex trips g++ 12's
        // maybe-uninitialized warning under -O2 with sanitizers).
        const auto u = sqlock::detail::parse_url(url);
        sql::ConnectOptionsMap opts;
        opts["hostName"] = sql::SQLString("tcp://" + u.host + ":" + std::to_string(u.port ? u.port : 3306));
        opts["userName"] = sql::SQLString(u.user);
        opts["password"] = sql::SQLString(u.password);
        opts["schema"] = sql::SQLString(u.database);
        opts["CLIENT_FOUND_ROWS"] = true;
        conn_.reset(get_driver_instance()->connect(opts));
        stmt_.reset(conn_->createStatement());
    }
    void exec(const std::string& sql) override { stmt_->execute(sql); }
    std::int64_t scalar(const std::string& sql) override {
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(sql));
        return rs->next() && !rs->isNull(1) ? rs->getInt64(1) : 0;
    }

private:
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
};

}  // namespace

std::unique_ptr<raw_connection> sqlite_db::raw() const { return std::make_unique<sqlite_raw>(file.string()); }
std::unique_ptr<raw_connection> postgres_db::raw() const { return std::make_unique<pg_raw>(url_); }
std::unique_ptr<raw_connection> mysql_db::raw() const { return std::make_unique<my_raw>(url_); }

void servers(const std::string& words) {
    const std::string script = env_or_throw("SQLOCK_TEST_SERVERS_SCRIPT");
    const std::string dir = env_or_throw("SQLOCK_TEST_SERVER_DIR");
    std::string cmd = "bash '" + script + "' " + words + " '" + dir + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("test-servers.sh " + words + " failed");
}

counter_history read_counter_history(const std::string& file) {
    counter_history h;
    {
        std::ifstream in(file);
        in >> h.count;
    }
    std::ifstream in(file + ".tokens");
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::int64_t token = 0;
        std::string owner;
        fields >> token >> owner;
        h.tokens.push_back(token);
        h.owners.insert(owner);
    }
    return h;
}

}  // namespace test
