// Fenced writes on SQLite through its C API:
//   sqlock_example_fenced_sqlite [FILE.db]
// A write fenced with a lease commits only while the lease holds its key; a
// holder that lost its lease (paused, slow) is turned away inside the
// write transaction itself.
#include <sqlock/sqlite.hpp>
#include <sqlock/sqlock.hpp>

#include <sqlite3.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

void exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "unknown error";
        sqlite3_free(err);
        throw std::runtime_error("sqlite: " + msg);
    }
}

// The application's own write, in its own transaction, fenced by `held`.
void add_credit(sqlite3* app, const sqlock::lease& held, const std::string& account, long cents) {
    exec(app, "BEGIN IMMEDIATE");  // a write transaction from the start
    try {
        sqlock::sqlite::fence(app, held);  // throws lease_lost_error unless held now
        exec(app, "INSERT INTO example_balances (account, cents, token) VALUES ('" + account + "', " +
                      std::to_string(cents) + ", " + std::to_string(held.token()) +
                      ") ON CONFLICT (account) DO UPDATE SET cents = cents + excluded.cents, token = excluded.token");
        exec(app, "COMMIT");
    } catch (...) {
        exec(app, "ROLLBACK");
        throw;
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::string file = argc > 1 ? argv[1] : "fenced-example.db";
    auto db = sqlock::client::open("sqlite:" + file);
    db.migrate();
    sqlite3* app = nullptr;
    if (sqlite3_open(file.c_str(), &app) != SQLITE_OK) return 69;
    sqlite3_busy_timeout(app, 5000);
    exec(app, "CREATE TABLE IF NOT EXISTS example_balances (account TEXT PRIMARY KEY, cents INTEGER NOT NULL, "
              "token INTEGER NOT NULL)");

    int status = 0;
    {
        // While the lease is held, the fenced transaction commits.
        sqlock::lease lease = db.acquire("accounts/42", 10s);
        add_credit(app, lease, "42", 100);
        std::printf("credited account 42 under token %lld\n", static_cast<long long>(lease.token()));

        // A holder whose lease ran out while another instance took over.
        auto stale = db.try_acquire("accounts/7", {.lease = 200ms, .auto_renew = false});
        std::this_thread::sleep_for(300ms);
        auto successor = sqlock::client::open("sqlite:" + file).try_acquire("accounts/7");
        try {
            add_credit(app, *stale, "7", 100);
            std::printf("BUG: a stale holder's write went through\n");
            status = 1;
        } catch (const sqlock::lease_lost_error& e) {
            std::printf("stale holder (token %lld) rejected: %s\n", static_cast<long long>(stale->token()),
                        e.what());
        }
        add_credit(app, *successor, "7", 100);
        std::printf("successor (token %lld) credited account 7\n", static_cast<long long>(successor->token()));
    }
    sqlite3_close(app);
    return status;
}
