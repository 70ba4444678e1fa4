// Fenced writes on MySQL / MariaDB through Connector/C++ 1.1:
//   sqlock_example_fenced_mysql mysql://user:pass@host:port/db
// A write fenced with a lease commits only while the lease holds its key; a
// holder that lost its lease (paused, partitioned, slow) is turned away by
// the database itself, not by a check the holder might run too late.
#include <sqlock/mysql.hpp>
#include <sqlock/sqlock.hpp>

#include <cppconn/driver.h>
#include <cppconn/statement.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

// The application's own write, in its own transaction, fenced by `held`.
void add_credit(sql::Connection& app, const sqlock::lease& held, const std::string& account, long cents) {
    app.setAutoCommit(false);
    try {
        sqlock::mysql::fence(app, held);  // first: throws lease_lost_error unless held now
        std::unique_ptr<sql::PreparedStatement> ps(app.prepareStatement(
            "INSERT INTO example_balances (account, cents, token) VALUES (?, ?, ?) "
            "ON DUPLICATE KEY UPDATE cents = cents + VALUES(cents), token = VALUES(token)"));
        ps->setString(1, account);
        ps->setInt64(2, cents);
        ps->setInt64(3, held.token());
        ps->executeUpdate();
        app.commit();
    } catch (...) {
        app.rollback();
        app.setAutoCommit(true);
        throw;
    }
    app.setAutoCommit(true);
}

// The application already has its connection; this one is made from the
// same URL: mysql://user[:password]@host[:port]/database.
std::unique_ptr<sql::Connection> connect(const std::string& url) {
    const auto rest = url.substr(url.find("://") + 3);
    const auto at = rest.rfind('@'), slash = rest.find('/', at);
    const auto user_pass = rest.substr(0, at), host_port = rest.substr(at + 1, slash - at - 1);
    const auto colon = user_pass.find(':');
    sql::ConnectOptionsMap opts;
    opts["hostName"] = sql::SQLString("tcp://" + host_port);
    opts["userName"] = sql::SQLString(user_pass.substr(0, colon));
    opts["password"] = sql::SQLString(colon == std::string::npos ? "" : user_pass.substr(colon + 1));
    opts["schema"] = sql::SQLString(rest.substr(slash + 1, rest.find('?') - slash - 1));
    return std::unique_ptr<sql::Connection>(get_driver_instance()->connect(opts));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s MYSQL_URL\n", argv[0]);
        return 64;
    }
    auto db = sqlock::client::open(argv[1]);
    db.migrate();
    auto app = connect(argv[1]);
    std::unique_ptr<sql::Statement>(app->createStatement())
        ->execute("CREATE TABLE IF NOT EXISTS example_balances (account VARCHAR(64) PRIMARY KEY, "
                  "cents BIGINT NOT NULL, token BIGINT NOT NULL)");

    // While the lease is held, the fenced transaction commits.
    sqlock::lease lease = db.acquire("accounts/42", 10s);
    add_credit(*app, lease, "42", 100);
    std::printf("credited account 42 under token %lld\n", static_cast<long long>(lease.token()));

    // A holder whose lease ran out while another instance took over.
    auto stale = db.try_acquire("accounts/7", {.lease = 200ms, .auto_renew = false});
    std::this_thread::sleep_for(300ms);
    auto successor = sqlock::client::open(argv[1]).try_acquire("accounts/7");
    try {
        add_credit(*app, *stale, "7", 100);
        std::printf("BUG: a stale holder's write went through\n");
        return 1;
    } catch (const sqlock::lease_lost_error& e) {
        std::printf("stale holder (token %lld) rejected: %s\n", static_cast<long long>(stale->token()), e.what());
    }
    add_credit(*app, *successor, "7", 100);
    std::printf("successor (token %lld) credited account 7\n", static_cast<long long>(successor->token()));
    return 0;
}
