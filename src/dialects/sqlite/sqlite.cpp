// SQLite dialect: the embedded default. One writer at a time, so a lease
// grant is a single statement; WAL lets readers run beside it.
//
// This file opens a session (and registers the database clock on it),
// migrates, translates errors, makes the dialect with the library's fence
// helper, and parses sqlite: URLs; the session's other operations are in
// leases.cpp, holders.cpp and admin.cpp (see session.hpp).

#include "dialects/common/fault.hpp"
#include "dialects/common/per_process.hpp"
#include "dialects/sqlite/doorbell.hpp"
#include "dialects/sqlite/session.hpp"
#include "dialects/sqlite/sqlite_url.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sqlock::detail::sqlite {

namespace {

// SQLite has no server, so its "database clock" is the host's real-time
// clock, shared by every process using the file. Read it with the raw system
// call: a process whose libc clock is faked (LD_PRELOAD faketime) or skewed
// still agrees with the others. Registered on every connection as
// <prefix>now_ms(); the statements in sql/sqlite/ compare expiries with it.
void sql_now_ms(sqlite3_context* context, int, sqlite3_value**) {
    timespec ts{};
    if (using_client_clock_for_testing()) [[unlikely]]
        ::clock_gettime(CLOCK_REALTIME, &ts);
    else
        syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    sqlite3_result_int64(context, static_cast<sqlite3_int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

void register_clock(sqlite3* db, const sql_library& sql) {
    const std::string name = sql.prefix() + "now_ms";
    sqlite3_create_function_v2(db, name.c_str(), 0, SQLITE_UTF8, nullptr, sql_now_ms, nullptr, nullptr, nullptr);
}

// The file a URL names, made absolute once, when the client is made: the
// pool opens connections later, as it needs them, and a relative path would
// be resolved against the working directory of that moment. A process that
// changed it (a daemon's chdir("/")) would open, and create, another file:
// its renewals would fail there, or split one client between two databases.
std::string absolute_file(const std::string& path, const std::vector<std::string>& secrets) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(path, ec);
    if (ec)
        throw config_error(scrub("cannot make the sqlite file name '" + path + "' absolute", secrets) +
                           " (is the working directory still there?): " + ec.message());
    return absolute.string();
}

// Symbolic links and "." / ".." resolved as far as the path exists: two
// spellings of one file give one name (the write queue's and tables()'s).
std::string canonical_file(const std::string& absolute) {
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(absolute, ec);
    return ec ? absolute : canonical.string();
}

}  // namespace

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what) {
    const std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    const int primary = rc & 0xff;
    if (msg.find("no such table") != std::string::npos) throw_schema_missing("the SQLite database", msg);
    if (primary == SQLITE_CANTOPEN || primary == SQLITE_NOTADB || primary == SQLITE_PERM)
        throw connection_error(what + ": " + msg);
    throw db_error(dialect_name, std::to_string(rc), what + ": " + msg);
}

sqlite_session::sqlite_session(const std::string& path, const dialect_context& ctx, const sql_library& sql,
                               std::shared_ptr<write_queue> writers)
    : ctx_(ctx), sql_(sql), writers_(std::move(writers)) {
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        sqlite3_close(db_);
        throw connection_error(scrub("cannot open sqlite database '" + path + "': " + msg, ctx.secrets) +
                               " (check that the directory exists and is writable)");
    }
    // Writers wait for each other up to the statement timeout instead of
    // failing with SQLITE_BUSY at once.
    busy_.install(db_, ctx.options.statement_timeout);
    register_clock(db_, sql_);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA foreign_keys=ON");
    // RETURNING and INSERT ... SELECT collect their rows in a scratch table.
    // Backed by a temporary file (the default), each such table allocates a
    // page cache of about 90 KiB at once and frees it at the statement's end,
    // which glibc kept handing back to the kernel and faulting in again:
    // about 8 page faults per lock + unlock. In memory, its one or two pages
    // are allocated one by one; one worker's lock + unlock got about 14%
    // faster (docs/benchmarks.md). sqlock's statements never sort or collect
    // more than a few rows.
    exec("PRAGMA temp_store=MEMORY");
    if (ctx.options.durability == durability::relaxed) exec(sql_.get("relaxed_durability"));
    sqlite3_stmt* level = nullptr;
    if (sqlite3_prepare_v2(db_, "PRAGMA synchronous", -1, &level, nullptr) == SQLITE_OK &&
        sqlite3_step(level) == SQLITE_ROW)
        commit_sync_ = sqlite3_column_int(level, 0);
    sqlite3_finalize(level);
}
sqlite_session::~sqlite_session() {
    for (auto& [name, st] : cache_) sqlite3_finalize(st);
    sqlite3_close_v2(db_);
}

int sqlite_session::schema_version() {
    try {
        auto q = prepare("schema_version");
        return q.step() ? static_cast<int>(q.integer(0)) : 0;
    } catch (const schema_error&) {
        return 0;
    }
}

void sqlite_session::migrate() {
    // BEGIN IMMEDIATE takes the write lock first, so concurrent migrators
    // queue behind one another and each sees the version the last one left.
    write_transaction([&] {
        const int current = schema_version();
        for (const auto& m : sql_.migrations())
            if (m.version > current) exec_migration(m.text);
        return true;
    });
    cache_clear();
}

void sqlite_session::exec_migration(const std::string& text) {
    const char* rest = text.c_str();
    while (*rest) {
        sqlite3_stmt* st = nullptr;
        const char* tail = nullptr;
        int rc = sqlite3_prepare_v2(db_, rest, -1, &st, &tail);
        const char* start = rest;
        rest = tail && tail > rest ? tail : rest + std::strlen(rest);
        if (rc != SQLITE_OK) {
            // A statement that fails to prepare leaves tail where parsing
            // stopped: go on after its terminating semicolon.
            const char* end = std::strchr(tail && tail > start ? tail : start, ';');
            rest = end ? end + 1 : start + std::strlen(start);
        }
        if (rc == SQLITE_OK && st) {
            if (ctx_.statements) ++*ctx_.statements;
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            }
            sqlite3_finalize(st);
            if (rc == SQLITE_DONE) continue;
        } else if (!st && rc == SQLITE_OK) {
            continue;  // only comments or white space
        }
        const std::string msg = sqlite3_errmsg(db_);
        if (msg.find("duplicate column name") != std::string::npos) continue;
        if (msg.find("no such table") != std::string::npos) throw_schema_missing("the SQLite database", msg);
        throw db_error(dialect_name, std::to_string(sqlite3_extended_errcode(db_)), "sqlite migration: " + msg);
    }
}

std::int64_t sqlite_session::now_ms() {
    auto q = prepare("now");
    q.step();
    return q.integer(0);
}

// Not a cached prepared statement: SQLite applies PRAGMA synchronous = N
// while it compiles the statement, so stepping a prepared one again does
// nothing.
void sqlite_session::set_synchronous(int level) {
    const std::string sql = "PRAGMA synchronous = " + std::to_string(level);
    if (int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); rc != SQLITE_OK) fail(db_, rc, sql);
}

void sqlite_session::exec(const std::string& sql) {
    if (ctx_.statements) ++*ctx_.statements;
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        std::string msg = err ? err : sqlite3_errstr(rc);
        sqlite3_free(err);
        if (msg.find("no such table") != std::string::npos) throw_schema_missing("the SQLite database", msg);
        if ((rc & 0xff) == SQLITE_CANTOPEN) throw connection_error("sqlite: " + msg);
        throw db_error(dialect_name, std::to_string(sqlite3_extended_errcode(db_)), "sqlite: " + msg);
    }
}

query sqlite_session::prepare(const std::string& name) {
    auto it = cache_.find(name);
    if (it == cache_.end()) {
        const std::string& sql = sql_.get(name);
        sqlite3_stmt* st = nullptr;
        int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                    &st, nullptr);
        if (rc != SQLITE_OK) fail(db_, rc, "preparing " + name);
        it = cache_.emplace(name, st).first;
    }
    return query(db_, it->second, ctx_.statements, in_write_tx_ ? nullptr : writers_.get());
}

class sqlite_dialect final : public dialect {
public:
    explicit sqlite_dialect(const dialect_context& ctx) : sqlite_dialect(ctx, file_of(ctx)) {}
    client_capabilities capabilities() const override {
        return {.row_locks = false, .wake_ups = true, .sql_fence = false, .relaxed_durability = true, .embedded = true};
    }
    std::unique_ptr<session> connect() override {
        return std::make_unique<sqlite_session>(path_, ctx_, sql(), writers_);
    }
    void idle() noexcept override { writers_->pass_on(); }
    std::unique_ptr<notifier> listen(const std::string& channel) override {
        return std::make_unique<sqlite_doorbell>(channel);
    }
    std::string fence_sql() const override {
        throw config_error("SQLite has no stored functions: fence a write with sqlock::sqlite::fence (sqlock/sqlite.hpp)");
    }

    // sqlock::sqlite::fence: the application's transaction takes SQLite's
    // write lock, then reads the key's fence row and lease.
    void fence_native(void* native, std::string_view key, std::int64_t token) const override {
        auto* db = static_cast<sqlite3*>(native);
        if (!db) throw config_error("sqlock::sqlite::fence: the database handle is null");
        if (sqlite3_get_autocommit(db))
            throw config_error("sqlock::sqlite::fence needs an open transaction: run BEGIN IMMEDIATE first");
        // The statements compare expiries with <prefix>now_ms(), the clock every
        // sqlock connection uses; give the application's connection the same one.
        register_clock(db, sql());
        auto run = [&](const char* name, auto&& on_row) {
            const std::string& text = sql().get(name);
            sqlite3_stmt* raw = nullptr;
            int rc = sqlite3_prepare_v2(db, text.c_str(), static_cast<int>(text.size()), &raw, nullptr);
            std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> st(raw, sqlite3_finalize);
            if (rc != SQLITE_OK) fail(db, rc, std::string("sqlock fence: preparing ") + name);
            sqlite3_bind_text(st.get(), 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
            while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) on_row(st.get());
            if (rc != SQLITE_DONE) fail(db, sqlite3_extended_errcode(db), std::string("sqlock fence: ") + name);
        };
        run("fence_lock", [](sqlite3_stmt*) {});
        std::string reason = "the fence read no row";
        run("fence", [&](sqlite3_stmt* st) {
            auto opt = [&](int col) {
                return sqlite3_column_type(st, col) == SQLITE_NULL ? std::nullopt
                                                                   : std::optional(sqlite3_column_int64(st, col));
            };
            reason = fence_reason(key, token, opt(0), opt(1), sqlite3_column_int64(st, 2) != 0);
        });
        if (!reason.empty()) throw lease_lost_error(reason);
    }

private:
    // The URL's file: absolute (opened), and canonical (which names it).
    struct file_names {
        std::string absolute, canonical;
    };
    static file_names file_of(const dialect_context& ctx) {
        auto absolute = absolute_file(parse_sqlite_path(ctx.url), ctx.secrets);
        auto canonical = canonical_file(absolute);
        return {std::move(absolute), std::move(canonical)};
    }
    sqlite_dialect(const dialect_context& ctx, const file_names& file)
        : dialect(dialect_name, ctx.options.table_prefix, file.canonical),
          path_(file.absolute),
          ctx_(ctx),
          writers_(write_queue_of(file.canonical)) {}

    std::string path_;  // absolute
    const dialect_context& ctx_;
    std::shared_ptr<write_queue> writers_;
};

}  // namespace sqlock::detail::sqlite

namespace sqlock::detail {

namespace {

struct write_queues {
    std::mutex mu;
    std::map<std::string, std::weak_ptr<write_queue>> of_file;  // by canonical path
};

}  // namespace

std::shared_ptr<write_queue> write_queue_of(const std::string& canonical_file) {
    auto& all = per_process<write_queues>();
    std::lock_guard lock(all.mu);
    auto q = all.of_file[canonical_file].lock();
    if (!q) {
        q = std::make_shared<write_queue>();
        all.of_file[canonical_file] = q;
    }
    return q;
}

std::string parse_sqlite_path(std::string_view url) {
    std::string_view rest = url.substr(url.find(':') + 1);
    // sqlite:///abs/path and sqlite://rel/path are URL-shaped spellings of
    // sqlite:/abs/path and sqlite:rel/path.
    std::string_view raw = rest.substr(0, 2) == "//" ? rest.substr(2) : rest;
    if (raw.find('?') != std::string_view::npos)
        throw config_error("sqlite URL takes no parameters: use sqlite:path/to/file.db");
    // Checked after decoding: "%3Amemory%3A" is ":memory:", and "%3F" a '?'
    // that SQLite (Debian's is built with URI filenames on) would read as
    // parameters such as nolock=1, which turns off the file locking every
    // grant relies on.
    const std::string path = percent_decode(raw);
    if (path.empty()) throw config_error("sqlite URL names no file: use sqlite:path/to/file.db");
    if (path.find('\0') != std::string::npos) throw config_error("sqlite URL's file name holds a NUL byte (%00)");
    if (path == ":memory:" || path.starts_with("file:"))
        throw config_error("sqlite URL must name a plain file, not ':memory:' (private to one connection, so "
                           "it cannot hold shared locks) or a 'file:' URI: use e.g. sqlite:/tmp/locks.db, "
                           "or ./file:name.db for a file whose name starts with 'file:'");
    return path;
}

std::unique_ptr<dialect> make_sqlite(const dialect_context& ctx) {
    return std::make_unique<sqlite::sqlite_dialect>(ctx);
}

}  // namespace sqlock::detail
