#pragma once
// Sees which commit setting sqlock's own connections write with. The setting
// (PostgreSQL's synchronous_commit, SQLite's PRAGMA synchronous) belongs to a
// connection and cannot be read from another one, and the library has no hook
// that lends out its connections. A trigger can: it runs in the writing
// session, so triggers on <prefix>locks, <prefix>fences, <prefix>job_runs and
// <prefix>waiters copy the writer's setting and the table's short name into <prefix>seen, one
// row per written row.

#include "support/backends.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace test {

class commit_probe {
public:
    // PostgreSQL and SQLite only: MySQL has no per-session commit setting.
    explicit commit_probe(const backend_base& db) : db_(db) {
        const std::string seen = db.table("seen");
        if (db.name() == "postgres") {
            std::string sql = "CREATE TABLE " + seen + " (setting text NOT NULL, tbl text NOT NULL);"
                              "CREATE FUNCTION " + db.table("see") + "() RETURNS trigger LANGUAGE plpgsql AS $$"
                              " BEGIN INSERT INTO " + seen + " VALUES (current_setting('synchronous_commit'),"
                              " TG_ARGV[0]); RETURN NULL; END $$;";
            for (const char* t : {"locks", "fences", "job_runs", "waiters"})
                sql += "CREATE TRIGGER " + db.table(std::string("see_") + t) + " AFTER INSERT OR UPDATE OR DELETE ON " +
                       db.table(t) + " FOR EACH ROW EXECUTE FUNCTION " + db.table("see") + "('" + t + "');";
            db.raw()->exec(sql);
        } else if (db.name() == "sqlite") {
            std::string sql = "CREATE TABLE " + seen + " (setting TEXT NOT NULL, tbl TEXT NOT NULL);";
            for (const char* t : {"locks", "fences", "job_runs", "waiters"})
                for (const char* event : {"INSERT", "UPDATE", "DELETE"})
                    sql += "CREATE TRIGGER " + db.table(std::string("see_") + t + "_" + event) + " AFTER " + event +
                           " ON " + db.table(t) + " BEGIN INSERT INTO " + seen +
                           " SELECT CAST(synchronous AS TEXT), '" + t + "' FROM pragma_synchronous; END;";
            db.raw()->exec(sql);
        } else {
            throw std::logic_error("commit_probe: no per-session commit setting on " + db.name());
        }
    }

    // The setting strict leaves in force on the test servers: the server's
    // default (synchronous_commit = on), the build's default (FULL = 2).
    std::string strict() const { return db_.name() == "postgres" ? "on" : "2"; }
    // What relaxed sets: synchronous_commit = off, synchronous = NORMAL (1).
    std::string relaxed() const { return db_.name() == "postgres" ? "off" : "1"; }

    // Rows written so far, by every connection.
    std::int64_t writes() const { return db_.raw()->scalar("SELECT count(*) FROM " + db_.table("seen")); }
    // Rows written so far to one table ("locks", "fences", "job_runs",
    // "waiters").
    std::int64_t writes_to(const std::string& table) const {
        return db_.raw()->scalar("SELECT count(*) FROM " + db_.table("seen") + " WHERE tbl = '" + table + "'");
    }
    // Of those (of one table's, when given), how many were written with
    // `setting`.
    std::int64_t writes_with(const std::string& setting, const std::string& table = {}) const {
        return db_.raw()->scalar("SELECT count(*) FROM " + db_.table("seen") + " WHERE setting = '" + setting + "'" +
                                 (table.empty() ? std::string() : " AND tbl = '" + table + "'"));
    }
    // Whether a connection of the test's own (an application's) has `setting`.
    bool application_has(const std::string& setting) const {
        return db_.raw()->scalar(db_.name() == "postgres"
                                     ? "SELECT (current_setting('synchronous_commit') = '" + setting + "')::int"
                                     : "SELECT CAST(synchronous AS TEXT) = '" + setting + "' FROM pragma_synchronous") ==
               1;
    }

private:
    const backend_base& db_;
};

}  // namespace test
