// SQLite: shared holders of a lock key and semaphore permits (migration
// 0006), each grant, release and renewal a BEGIN IMMEDIATE transaction of a
// few statements; a release that lets a waiter in rings its doorbell. The
// session is in session.hpp.

#include "dialects/common/fault.hpp"
#include "dialects/sqlite/doorbell.hpp"
#include "dialects/sqlite/session.hpp"

#include <set>
#include <string>
#include <vector>

namespace sqlock::detail::sqlite {

grant_result sqlite_session::grant_holder(const holder_request& r) {
    grant_result out;
    try {
        write_transaction([&] {
            out.token = r.kind == 'S' ? grant_shared(r) : grant_permit(r);
            if (out.token && r.ticket != no_ticket) dequeue(r.ticket);
            return out.token.has_value();
        });
    } catch (const db_error& e) {
        // The busy timeout ran out: contention, as for grant().
        if (!e.code().empty() && (std::stoi(e.code()) & 0xff) == SQLITE_BUSY) return {};
        throw;
    }
    if (!out.token) {
        auto q = prepare(r.kind == 'S' ? "remaining" : "permit_remaining");
        q.bind(1, r.key);
        if (q.step() && !q.null(0)) out.remaining_ms = q.integer(0);
    }
    return out;
}

std::optional<std::int64_t> sqlite_session::grant_shared(const holder_request& r) {
    if (update("shared_grant", r.key, r.owner, r.lease_ms, r.holder, r.note, r.ticket, r.priority) == 0)
        return std::nullopt;
    fault(fault_point::sqlite_shared_granted);
    return first_integer("shared_insert", r.key, r.owner, r.lease_ms, r.holder, r.note);
}

std::optional<std::int64_t> sqlite_session::grant_permit(const holder_request& r) {
    update("permit_define", r.key, r.permits);
    auto token = first_integer("permit_grant", r.key, r.owner, r.permits, r.lease_ms, r.holder, r.note, r.ticket,
                               r.priority);
    if (token) update("permit_bump", r.key);
    return token;
}

bool sqlite_session::release_holder(char kind, std::string_view key, std::string_view owner) {
    bool live = false;
    std::string wake;  // the head waiter's channel, when this release lets it in
    const auto release = [&] {
        if (kind == 'S') {
            live = first_integer("shared_release", key, owner).value_or(0) != 0;
            auto lower = prepare("shared_lower");
            lower.bind(1, key);
            // Drained only after a row (see grant_statement).
            if (lower.step()) {
                if (!lower.null(0)) wake = lower.text(0);
                lower.run();
            }
        } else {
            auto q = prepare("permit_release");
            q.bind(1, key).bind(2, owner);
            if (q.step()) {
                live = q.integer(0) != 0;
                if (!q.null(1)) wake = q.text(1);
                q.run();
            }
        }
        return true;
    };
    unflushed([&] { return write_transaction(release); });
    if (!wake.empty()) ring_sqlite_doorbell(wake);  // committed: the waiter finds the key free
    return live;
}

std::vector<bool> sqlite_session::renew_holders(const std::vector<renewal>& batch) {
    const std::string json = renewals_json(batch);
    std::set<std::string> renewed;
    write_transaction([&] {
        {
            auto q = prepare("holders_renew");
            q.bind(1, std::string_view(json));
            while (q.step()) renewed.insert(q.text(0));
        }
        update("holders_raise", std::string_view(json));
        return true;
    });
    return present_in(batch, renewed, [](const renewal& r) { return r.owner; });
}

bool sqlite_session::holder_live(char kind, std::string_view key, std::string_view owner) {
    return first_integer("holder_live", std::string_view(&kind, 1), key, owner).value_or(0) > 0;
}

void sqlite_session::set_permits(std::string_view name, std::int64_t permits) { update("permit_limit", name, permits); }

std::vector<holder_row> sqlite_session::holders(std::string_view prefix, std::size_t limit) {
    auto q = prepare("holders_list");
    q.bind(1, prefix).bind(2, static_cast<std::int64_t>(limit));
    std::vector<holder_row> out;
    while (q.step())
        out.push_back({q.text(0).c_str()[0], q.text(1), q.text(2), q.integer(3), q.integer(4), q.text(5),
                       q.text(6), q.null(7) ? 0 : q.integer(7)});
    return out;
}

std::size_t sqlite_session::sweep_holders(std::size_t limit) {
    return update("holders_sweep", static_cast<std::int64_t>(limit));
}

}  // namespace sqlock::detail::sqlite
