// Fenced writes on PostgreSQL through libpqxx:
//   sqlock_example_fenced_postgres postgresql://user:pass@host/db
// A write fenced with a lease commits only while the lease holds its key; a
// holder that lost its lease (paused, partitioned, slow) is turned away by
// the database itself, not by a check the holder might run too late.
#include <sqlock/postgres.hpp>
#include <sqlock/sqlock.hpp>

#include <pqxx/pqxx>

#include <cstdio>
#include <thread>

using namespace std::chrono_literals;

namespace {

// The application's own write, in its own transaction, fenced by `held`.
void add_credit(pqxx::connection& app, const sqlock::lease& held, const std::string& account, long cents) {
    pqxx::work tx(app);
    sqlock::postgres::fence(tx, held);  // first: throws lease_lost_error unless held now
    tx.exec_params(
        "INSERT INTO example_balances (account, cents, token) VALUES ($1, $2, $3) "
        "ON CONFLICT (account) DO UPDATE SET cents = example_balances.cents + $2, token = $3",
        account, cents, held.token());
    tx.commit();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s POSTGRES_URL\n", argv[0]);
        return 64;
    }
    auto db = sqlock::client::open(argv[1]);
    db.migrate();
    pqxx::connection app(argv[1]);
    pqxx::nontransaction(app).exec(
        "CREATE TABLE IF NOT EXISTS example_balances (account text PRIMARY KEY, cents bigint NOT NULL, "
        "token bigint NOT NULL)");

    // While the lease is held, the fenced transaction commits.
    sqlock::lease lease = db.acquire("accounts/42", 10s);
    add_credit(app, lease, "42", 100);
    std::printf("credited account 42 under token %lld\n", static_cast<long long>(lease.token()));

    // A holder whose lease ran out while another instance took over.
    auto stale = db.try_acquire("accounts/7", {.lease = 200ms, .auto_renew = false});
    std::this_thread::sleep_for(300ms);
    auto successor = sqlock::client::open(argv[1]).try_acquire("accounts/7");
    try {
        add_credit(app, *stale, "7", 100);
        std::printf("BUG: a stale holder's write went through\n");
        return 1;
    } catch (const sqlock::lease_lost_error& e) {
        std::printf("stale holder (token %lld) rejected: %s\n", static_cast<long long>(stale->token()), e.what());
    }
    add_credit(app, *successor, "7", 100);
    std::printf("successor (token %lld) credited account 7\n", static_cast<long long>(successor->token()));
    return 0;
}
