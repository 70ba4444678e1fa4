// Raw driver connections for tests: SQL behind sqlock's back, and
// application transactions fenced with the per-backend helpers.

#include "support/backends.hpp"

#include "dialects/mysql/mysql_url.hpp"
#include "dialects/sqlite/sqlite_url.hpp"

#include <sqlock/mysql.hpp>
#include <sqlock/postgres.hpp>
#include <sqlock/sqlite.hpp>

#include <cppconn/driver.h>
#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <pqxx/pqxx>
#include <sqlite3.h>

#include <optional>

namespace test {
namespace {


class sqlite_raw : public raw_connection {
public:
    explicit sqlite_raw(const std::string& file) {
        if (sqlite3_open(file.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite open failed");
        sqlite3_busy_timeout(db_, 10000);
    }
    ~sqlite_raw() override { sqlite3_close(db_); }
    void begin() override { exec("BEGIN IMMEDIATE"); }
    void fence(const sqlock::lease& held) override { sqlock::sqlite::fence(db_, held); }
    void commit() override { exec("COMMIT"); }
    void rollback() override { exec("ROLLBACK"); }
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
        if (tx_) {
            tx_->exec(sql);
            return;
        }
        pqxx::nontransaction tx(conn_);
        tx.exec(sql);
    }
    std::int64_t scalar(const std::string& sql) override {
        auto read = [&](pqxx::transaction_base& tx) {
            auto r = tx.exec(sql);
            return r.empty() || r[0][0].is_null() ? std::int64_t{0} : r[0][0].as<std::int64_t>();
        };
        if (tx_) return read(*tx_);
        pqxx::nontransaction tx(conn_);
        return read(tx);
    }
    void begin() override { tx_.emplace(conn_); }
    void fence(const sqlock::lease& held) override { sqlock::postgres::fence(*tx_, held); }
    void commit() override {
        tx_->commit();
        tx_.reset();
    }
    void rollback() override { tx_.reset(); }

private:
    pqxx::connection conn_;
    std::optional<pqxx::work> tx_;
};

class my_raw : public raw_connection {
public:
    explicit my_raw(const std::string& url) {
        // The library's own URL parser (std::regex trips g++ 12's
        // maybe-uninitialized warning under -O2 with sanitizers).
        const auto u = sqlock::detail::parse_mysql_url(url);
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
    void begin() override { conn_->setAutoCommit(false); }
    void fence(const sqlock::lease& held) override { sqlock::mysql::fence(*conn_, held); }
    void commit() override {
        conn_->commit();
        conn_->setAutoCommit(true);
    }
    void rollback() override {
        conn_->rollback();
        conn_->setAutoCommit(true);
    }
    std::int64_t scalar(const std::string& sql) override {
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(sql));
        return rs->next() && !rs->isNull(1) ? rs->getInt64(1) : 0;
    }

private:
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
};

}  // namespace

std::unique_ptr<raw_connection> raw_connection_for(const std::string& url) {
    if (url.rfind("sqlite:", 0) == 0) return std::make_unique<sqlite_raw>(sqlock::detail::parse_sqlite_path(url));
    if (url.rfind("postgres", 0) == 0) return std::make_unique<pg_raw>(url);
    return std::make_unique<my_raw>(url);
}

}  // namespace test
