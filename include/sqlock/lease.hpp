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
// How the library hands a new grant to a lease; not for applications.
struct grant_ref {
    std::shared_ptr<grant> g;
    std::shared_ptr<const void> user;  // the application's hold on the client (see client::open)
};
}

// What a lease holds: a key alone (client::acquire), a key together with
// other readers (client::acquire_shared), or one permit of a semaphore
// (client::acquire_permit).
enum class lease_kind { exclusive, shared, permit };
// Returns "exclusive", "shared" or "permit".
const char* to_string(lease_kind k) noexcept;

// The clock lease deadlines are kept on: CLOCK_BOOTTIME. Unlike
// std::chrono::steady_clock (CLOCK_MONOTONIC) it keeps counting while the
// machine is suspended, as the database's clock does, so a lease held across
// a suspend longer than its length is lost on resume. Meets the standard
// Clock requirements (usable with sqlock::mutex::try_lock_until).
struct lease_clock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<lease_clock>;
    static constexpr bool is_steady = true;
    static time_point now() noexcept;
};

// A held key. Move-only; releases the key when destroyed (never throwing:
// failures there are logged). A lease may be used from any thread, but not
// from two threads at once without external synchronization.
//
// Reentrancy (lock_options::reentrant) follows the holder: only the thread
// that acquired the lease, while the lease has not been moved, gets the same
// grant back from another acquisition of its key. Moving a lease (move
// construction or assignment, e.g. into another thread, a container or a
// std::optional) ends that: afterwards no thread reenters the grant, so an
// acquisition of the key contends with the moved lease like any other.
// A moved-from lease holds nothing and says so: lost() is true, check() and
// fence_sql() throw lease_lost_error, renew() is false, release() does
// nothing, key() and owner() are empty, token() is 0.
class lease {
public:
    explicit lease(detail::grant_ref g) noexcept;
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
    // A shared lease's token is its group's: the first reader of a group
    // (readers that hold the key together) draws it from the key's counter as
    // a writer does; the others share it, and the next writer's overtakes it. A
    // permit's is strictly larger than every earlier permit of its semaphore.
    std::int64_t token() const;
    sqlock::mode mode() const;
    lease_kind kind() const;

    // True once the lease is known to be lost, or once its local deadline
    // (last confirmed grant or renewal + lease - safety margin, on
    // lease_clock) has passed. A lost lease stays lost.
    bool lost() const;
    // The local deadline on lease_clock: past it, lost() is true unless a
    // renewal confirmed meanwhile moved it on. Work that must end while the
    // lease is held (a child process, a request to another service) can be
    // bounded by it.
    lease_clock::time_point deadline() const;
    // Throws lease_lost_error when lost() is true.
    void check() const;
    // Stop is requested when the lease is lost: poll it, or attach a
    // std::stop_callback to cancel work that relies on the lease. Such a
    // callback runs on the thread that notices the loss (usually the
    // client's deadline timer, which keeps every lease's deadline): keep it
    // short; on_lost is the place for slow work.
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
    // A shared lease fences too: the write fails once a writer has been
    // granted the key since (its token moved on) or once no reader holds it;
    // it does not tell this reader's own lease from another live reader's.
    // A permit has no SQL fence: throws config_error.
    std::string fence_sql() const;

    // Gives the key up. Idempotent. A reentrant lease gives it up when the
    // last lease sharing its grant is released. Releasing a lost lease does
    // nothing to the key's new holder. Throws connection_error / db_error.
    void release();

private:
    friend struct detail::lease_access;
    void release_quietly() noexcept;
    std::shared_ptr<detail::grant> grant_;
    std::shared_ptr<const void> user_;  // keeps the client's listener open while the lease lives
    bool released_ = false;
};

}  // namespace sqlock
