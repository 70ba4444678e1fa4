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
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>
#include <pqxx/pqxx>
#include <sqlite3.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace test {
namespace {


class sqlite_raw : public raw_connection {
public:
    sqlite_raw(const std::string& file, std::chrono::seconds io_bound) {
        if (sqlite3_open(file.c_str(), &db_) != SQLITE_OK) throw std::runtime_error("sqlite open failed");
        sqlite3_busy_timeout(db_, io_bound.count() > 0 ? static_cast<int>(io_bound.count() * 1000) : 10000);
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
        auto all = rows(sql);
        return all.empty() || all[0].empty() || all[0][0].empty() ? 0 : std::stoll(all[0][0]);
    }
    std::vector<std::vector<std::string>> rows(const std::string& sql) override {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
            throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
        std::vector<std::vector<std::string>> out;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            auto& row = out.emplace_back();
            for (int i = 0; i < sqlite3_column_count(st); ++i) {
                const auto* text = sqlite3_column_text(st, i);
                row.emplace_back(text ? reinterpret_cast<const char*>(text) : "");
            }
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) throw std::runtime_error(std::string("sqlite: ") + sqlite3_errmsg(db_));
        return out;
    }

private:
    sqlite3* db_ = nullptr;
};

class pg_raw : public raw_connection {
public:
    explicit pg_raw(const std::string& url) : conn_(url) {}
    // Keepalives find a silent server (replies dropped) and TCP_USER_TIMEOUT
    // one that stopped acknowledging, each within about io_bound.
    static std::string bounded(std::string url, std::chrono::seconds io_bound) {
        // sqlock's own parameter, which libpq does not know (PgBouncer URLs).
        for (const char* p : {"&sqlock_pool_mode=transaction", "?sqlock_pool_mode=transaction"})
            if (auto at = url.find(p); at != std::string::npos) {
                url.erase(at, std::string_view(p).size());
                if (p[0] == '?' && at < url.size()) url[at] = '?';
            }
        if (io_bound.count() <= 0) return url;
        const auto s = std::to_string(std::max<std::int64_t>(io_bound.count() / 3, 1));
        return url + (url.find('?') == std::string::npos ? "?" : "&") + "connect_timeout=" +
               std::to_string(io_bound.count()) + "&keepalives=1&keepalives_idle=" + s + "&keepalives_interval=" + s +
               "&keepalives_count=2&tcp_user_timeout=" + std::to_string(io_bound.count() * 1000);
    }
    void exec(const std::string& sql) override {
        if (tx_) {
            tx_->exec(sql);
            return;
        }
        pqxx::nontransaction tx(conn_);
        tx.exec(sql);
    }
    std::int64_t scalar(const std::string& sql) override {
        auto all = rows(sql);
        return all.empty() || all[0].empty() || all[0][0].empty() ? 0 : std::stoll(all[0][0]);
    }
    std::vector<std::vector<std::string>> rows(const std::string& sql) override {
        auto read = [&](pqxx::transaction_base& tx) {
            std::vector<std::vector<std::string>> out;
            for (const auto& r : tx.exec(sql)) {
                auto& row = out.emplace_back();
                for (const auto& f : r) row.emplace_back(f.is_null() ? "" : f.c_str());
            }
            return out;
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
    my_raw(const std::string& url, std::chrono::seconds io_bound) {
        // The library's own URL parser (std::regex trips g++ 12's
        // maybe-uninitialized warning under -O2 with sanitizers).
        const auto u = sqlock::detail::parse_mysql_url(url);
        sql::ConnectOptionsMap opts;
        opts["hostName"] = sql::SQLString("tcp://" + u.host + ":" + std::to_string(u.port ? u.port : 3306));
        opts["userName"] = sql::SQLString(u.user);
        opts["password"] = sql::SQLString(u.password);
        opts["schema"] = sql::SQLString(u.database);
        opts["CLIENT_FOUND_ROWS"] = true;
        if (io_bound.count() > 0) {
            const int bound = static_cast<int>(io_bound.count());
            opts["OPT_CONNECT_TIMEOUT"] = bound;
            opts["OPT_READ_TIMEOUT"] = bound;
            opts["OPT_WRITE_TIMEOUT"] = bound;
        }
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
        std::int64_t out = 0;
        {
            std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(sql));
            out = rs->next() && !rs->isNull(1) ? rs->getInt64(1) : 0;
        }
        // A CALL's status result follows its rows; the connection takes no
        // other statement until it is read.
        while (stmt_->getMoreResults()) std::unique_ptr<sql::ResultSet> more(stmt_->getResultSet());
        return out;
    }
    std::vector<std::vector<std::string>> rows(const std::string& sql) override {
        std::unique_ptr<sql::ResultSet> rs(stmt_->executeQuery(sql));
        const auto columns = rs->getMetaData()->getColumnCount();
        std::vector<std::vector<std::string>> out;
        while (rs->next()) {
            auto& row = out.emplace_back();
            for (unsigned i = 1; i <= columns; ++i) row.emplace_back(rs->isNull(i) ? "" : std::string(rs->getString(i)));
        }
        return out;
    }

private:
    std::unique_ptr<sql::Connection> conn_;
    std::unique_ptr<sql::Statement> stmt_;
};

}  // namespace

std::unique_ptr<raw_connection> raw_connection_for(const std::string& url, std::chrono::seconds io_bound) {
    if (url.rfind("sqlite:", 0) == 0)
        return std::make_unique<sqlite_raw>(sqlock::detail::parse_sqlite_path(url), io_bound);
    if (url.rfind("postgres", 0) == 0) return std::make_unique<pg_raw>(pg_raw::bounded(url, io_bound));
    return std::make_unique<my_raw>(url, io_bound);
}

}  // namespace test
