#pragma once
// The errors sqlock throws. Losing a race is not an error: try_acquire returns
// an empty optional. Every message says what to do and never prints a password.

#include <stdexcept>
#include <string>

namespace sqlock {

// Base of every exception sqlock throws.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Bad URL, bad options, bad key, or a backend this build does not include.
// Thrown before any SQL runs.
class config_error : public error {
public:
    using error::error;
};

// acquire() did not get the key before its timeout ran out.
class timeout_error : public error {
public:
    using error::error;
};

// acquire() was cancelled through lock_options::cancel before it got the key.
class cancelled_error : public error {
public:
    using error::error;
};

// The database could not be reached, or the connection died mid-operation.
class connection_error : public error {
public:
    using error::error;
};

// The sqlock tables are missing or older than this library: run migrate().
class schema_error : public error {
public:
    using error::error;
};

// The lease is no longer held (it expired, was taken over, or its connection died).
class lease_lost_error : public error {
public:
    using error::error;
};

// Any other failure reported by the database, with its dialect ("postgres",
// "mysql", "sqlite") and its code: the SQLSTATE on PostgreSQL, the vendor
// error number on MySQL/MariaDB, the extended result code on SQLite.
class db_error : public error {
public:
    db_error(std::string dialect, std::string code, const std::string& message)
        : error(message), dialect_(std::move(dialect)), code_(std::move(code)) {}

    const std::string& dialect() const noexcept { return dialect_; }
    const std::string& code() const noexcept { return code_; }

private:
    std::string dialect_;
    std::string code_;
};

}  // namespace sqlock
