// PostgreSQL: shared holders of a lock key and semaphore permits (migration
// 0006): one statement each to grant, release and renew them; the watchdog
// renews them as one JSON batch. The session is in session.hpp.

#include "dialects/postgres/session.hpp"

#include <set>
#include <string>
#include <vector>

namespace sqlock::detail::postgres {

grant_result pg_session::grant_holder(const holder_request& r) {
    return granting([&] {
        return r.kind == 'S' ? run("shared_grant", r.key, r.owner, r.lease_ms, r.holder, r.note, r.ticket,
                                   r.priority)
                             : run("permit_grant", r.key, r.owner, r.permits, r.lease_ms, r.holder, r.note,
                                   r.ticket, r.priority);
    });
}

bool pg_session::release_holder(char kind, std::string_view key, std::string_view owner) {
    return guarded("release", [&] {
        return run(kind == 'S' ? "shared_release" : "permit_release", key, owner)[0][0].as<bool>();
    });
}

std::vector<bool> pg_session::renew_holders(const std::vector<renewal>& batch) {
    return guarded("renewing holders", [&] {
        std::set<std::string> renewed;
        for (const auto& row : run("holders_renew", renewals_json(batch))) renewed.insert(row[0].as<std::string>());
        return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
    });
}

bool pg_session::holder_live(char kind, std::string_view key, std::string_view owner) {
    return guarded("renewing a holder", [&] {
        return run("holder_live", std::string(1, kind), key, owner)[0][0].as<std::int64_t>() > 0;
    });
}

void pg_session::set_permits(std::string_view name, std::int64_t permits) {
    guarded("setting permits", [&] { run("permit_limit", name, permits); });
}

std::vector<holder_row> pg_session::holders(std::string_view prefix, std::size_t limit) {
    return guarded("listing holders", [&] {
        std::vector<holder_row> out;
        for (const auto& row : run("holders_list", prefix, static_cast<std::int64_t>(limit))) {
            const pg_row r{row};
            out.push_back({r.text(0).c_str()[0], r.text(1), r.text(2), r.integer(3), r.integer(4), r.text(5),
                           r.text(6), r.integer(7)});
        }
        return out;
    });
}

std::size_t pg_session::sweep_holders(std::size_t limit) {
    return affected("holders_sweep", static_cast<std::int64_t>(limit));
}

}  // namespace sqlock::detail::postgres
