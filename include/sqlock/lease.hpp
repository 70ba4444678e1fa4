#pragma once
// sqlock::lease: proof of holding one key.

#include <sqlock/options.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

namespace sqlock {

namespace detail {
struct grant;
class client_impl;
struct lease_access;
}

// A held key. Move-only; releases the key when destroyed (never throwing:
// failures there are logged). A lease may be used from any thread, but not
// from two threads at once without external synchronization.
class lease {
public:
    lease(lease&& other) noexcept;
    lease& operator=(lease&& other) noexcept;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease();

    const std::string& key() const;
    // Random id of this acquisition (32 hex digits); never reused.
    const std::string& owner() const;
    // Fencing token: strictly larger than every earlier grant of this key.
    // Pass it to the resource you protect and have it reject smaller ones.
    std::int64_t token() const;
    sqlock::mode mode() const;

    // True once the lease is known to be lost, or once its local deadline
    // (last confirmed grant or renewal + lease - safety margin, on the
    // monotonic clock) has passed. A lost lease stays lost.
    bool lost() const;
    // The local deadline on std::chrono::steady_clock: past it, lost() is
    // true unless a renewal confirmed meanwhile moved it on. Work that must
    // end while the lease is held (a child process, a request to another
    // service) can be bounded by it.
    std::chrono::steady_clock::time_point deadline() const;
    // Throws lease_lost_error when lost() is true.
    void check() const;
    // Stop is requested when the lease is lost: poll it, or attach a
    // std::stop_callback to cancel work that relies on the lease.
    std::stop_token stop_token() const;

    // Extends the lease by its length, by database time. Returns false (and
    // the lease becomes lost) when the key is no longer held by this owner.
    // For select_for_update, checks that the holding connection is alive.
    // Throws connection_error / db_error when the database cannot answer.
    bool renew();

    // The dialect of the database holding the lease: "postgres", "mysql" or "sqlite".
    std::string_view dialect() const;
    // The statement that fences a write by this lease inside the
    // application's own transaction, for drivers sqlock has no helper for:
    // bind key() and token() to its two placeholders and run it first in the
    // transaction. It fails (PostgreSQL: SQLSTATE SQ001; MySQL: SQLSTATE 45000,
    // error 1644, message starting "sqlock:") unless the lease holds the key
    // right now by database time, and keeps any new grant of the key waiting
    // until the transaction ends. PostgreSQL and MySQL only (it calls the SQL
    // function <prefix>assert_held installed by migrate()); on SQLite use
    // sqlock::sqlite::fence. See sqlock/postgres.hpp and sqlock/mysql.hpp.
    std::string fence_sql() const;

    // Gives the key up. Idempotent. A reentrant lease gives it up when the
    // last lease sharing its grant is released. Releasing a lost lease does
    // nothing to the key's new holder. Throws connection_error / db_error.
    void release();

private:
    friend class detail::client_impl;
    friend struct detail::lease_access;
    explicit lease(std::shared_ptr<detail::grant> g);
    void release_quietly() noexcept;
    std::shared_ptr<detail::grant> grant_;
    bool released_ = false;
};

}  // namespace sqlock
