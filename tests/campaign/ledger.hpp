#pragma once
// The application side of a campaign cell: writes to the ledger tables in
// the same database as the locks, fenced by a lease through the public fence
// helpers (sqlock::postgres::fence and friends), on a connection of its own.

#include "campaign/campaign.hpp"
#include "support/backends.hpp"

#include <sqlock/sqlock.hpp>

#include <memory>
#include <string>

namespace campaign {

class ledger {
public:
    // client: the writer's id, stored in every row it writes. unfenced: the
    // negative control, writing without the fence.
    ledger(std::string url, std::string prefix, int client, bool unfenced, event_log& log);

    // The write every lock grant makes twice: bump the key's counter and
    // record (key, counter value, token, owner, grant time) in the history.
    // Logged as a "write" event.
    void fenced_write(const sqlock::lease& held, int phase);
    // A job run's effect: one row per attempt that reaches it. Logged as an
    // "effect" event. False unless it committed.
    bool effect(const sqlock::job_context& c);
    // An act of a reader, writer or permit holder: reads the database time,
    // then, in a transaction, fences (a shared or exclusive lease: the
    // public fence helper; a permit, which has no SQL fence: a read of its
    // holder row, live by database time) and records the time with the
    // lease's kind, token and owner. Logged as an "act" event. Unfenced
    // (the negative control) records it without either check.
    void act(const sqlock::lease& held);

private:
    template <class Body>
    bool transact(nlohmann::json& e, const sqlock::lease& held, Body&& body, bool read_time = false);
    void rollback();

    std::string url_;
    int client_;
    bool unfenced_;
    event_log& log_;
    dialect_sql sql_;
    tables tables_;
    std::unique_ptr<test::raw_connection> raw_;
    std::int64_t writes_ = 0;
};

}  // namespace campaign
