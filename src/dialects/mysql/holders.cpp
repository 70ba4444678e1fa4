// MySQL / MariaDB: shared holders of a lock key and semaphore permits
// (migration 0006): their grants and releases are stored procedures, the
// watchdog renews them as one JSON batch. The session is in session.hpp.

#include "dialects/mysql/session.hpp"

#include <set>
#include <string>
#include <vector>

namespace sqlock::detail::mysql {

grant_result my_session::grant_holder(const holder_request& r) {
    if (galera_ && r.kind == 'S') throw config_error(galera_no_shared_locks());
    return guarded("grant", [&]() -> grant_result {
        auto& call = prepared(r.kind == 'S' ? "shared_grant" : "permit_grant");
        if (r.kind == 'S')
            bind_all(call, r.key, r.owner, r.lease_ms, r.holder, r.note, r.ticket, r.priority);
        else
            bind_all(call, r.key, r.owner, r.permits, r.lease_ms, r.holder, r.note, r.ticket, r.priority);
        grant_result out;
        try {
            for_rows(call, [&](sql::ResultSet& rs) {
                if (!rs.isNull(1)) out.token = rs.getInt64(1);
                else if (!rs.isNull(2)) out.remaining_ms = rs.getInt64(2);
            });
        } catch (const sql::SQLException& e) {
            // The procedure rolled back: contention, as for grant().
            if (is_contention(e.getErrorCode()) || e.getErrorCode() == er_dup_entry ||
                e.getErrorCode() == er_statement_timeout)
                return grant_result{};
            throw;
        }
        return out;
    });
}

bool my_session::release_holder(char kind, std::string_view key, std::string_view owner) {
    return guarded("release", [&] {
        // Procedures that also wake the next waiter after their commit
        // (migrations/mysql/0007_release_wake_ups.sql).
        return scalar(kind == 'S' ? "shared_release" : "permit_release", key, owner).value_or(0) == 1;
    });
}

std::vector<bool> my_session::renew_holders(const std::vector<renewal>& batch) {
    return guarded("renewing holders", [&] {
        auto& call = prepared("holders_renew");
        bind_all(call, std::string_view(renewals_json(batch)));
        std::set<std::string> renewed;
        try {
            for_rows(call, [&](sql::ResultSet& rs) { renewed.insert(rs.getString(1)); });
        } catch (const sql::SQLException& e) {
            // A key's row stayed locked (a grant or release of it): the
            // caller renews each holder alone.
            if (!is_contention(e.getErrorCode())) throw;
            return std::vector<bool>(batch.size(), false);
        }
        return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
    });
}

bool my_session::holder_live(char kind, std::string_view key, std::string_view owner) {
    return guarded("renewing a holder", [&] {
        return scalar("holder_live", std::string_view(&kind, 1), key, owner).value_or(0) > 0;
    });
}

void my_session::set_permits(std::string_view name, std::int64_t permits) {
    guarded("setting permits", [&] { update("permit_limit", name, permits); });
}

std::vector<holder_row> my_session::holders(std::string_view prefix, std::size_t limit) {
    return guarded("listing holders", [&] {
        auto& ps = prepared("holders_list");
        bind_all(ps, prefix, prefix, static_cast<std::int64_t>(limit));
        std::vector<holder_row> out;
        for_rows(ps, [&](sql::ResultSet& rs) {
            const my_row r{rs};
            out.push_back({r.text(0).c_str()[0], r.text(1), r.text(2), r.integer(3), r.integer(4), r.text(5),
                           r.text(6), r.integer(7)});
        });
        return out;
    });
}

std::size_t my_session::sweep_holders(std::size_t limit) {
    return guarded("sweep_holders", [&] { return update("holders_sweep", static_cast<std::int64_t>(limit)); });
}

}  // namespace sqlock::detail::mysql
