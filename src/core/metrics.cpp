// client::metrics_text(): the client's counters, gauges and histograms
// (core/telemetry.hpp) in the Prometheus text exposition format 0.0.4. Apart
// from client.cpp's facade and administration because it is rendering only:
// it reads the telemetry and writes text.
// https://prometheus.io/docs/instrumenting/exposition_formats/

#include "core/client_impl.hpp"
#include "core/telemetry.hpp"

#include <sqlock/client.hpp>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace sqlock::detail {

namespace {

// One metric family at a time: HELP and TYPE, then its samples together.
class exposition {
public:
    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;  // constant texts here: no backslash or line feed to escape
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }
    // labels: name="value" pairs, values escaped here.
    void sample(std::string_view name, std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
                std::string_view value) {
        out_ += name;
        if (labels.size() > 0) {
            out_ += '{';
            bool first = true;
            for (const auto& [label, v] : labels) {
                if (!first) out_ += ',';
                first = false;
                out_ += label;
                out_ += "=\"";
                out_ += escape_label_value(v);
                out_ += '"';
            }
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }
    void counter(std::string_view name, std::string_view help, std::uint64_t value) {
        family(name, "counter", help);
        sample(name, {}, std::to_string(value));
    }
    void gauge(std::string_view name, std::string_view help, std::int64_t value) {
        family(name, "gauge", help);
        sample(name, {}, std::to_string(value));
    }
    void histogram(std::string_view name, std::string_view help, const duration_histogram& h) {
        family(name, "histogram", help);
        const auto snap = h.read();
        const std::string bucket = std::string(name) + "_bucket";
        for (std::size_t i = 0; i < h.bounds().size(); ++i)
            sample(bucket, {{"le", bound(h.bounds()[i])}}, std::to_string(snap.cumulative[i]));
        sample(bucket, {{"le", "+Inf"}}, std::to_string(snap.cumulative.back()));
        sample(std::string(name) + "_sum", {}, seconds(snap.sum_ns));
        sample(std::string(name) + "_count", {}, std::to_string(snap.cumulative.back()));
    }
    std::string take() { return std::move(out_); }

private:
    // A bucket bound as Prometheus clients write them: 0.005, 1, 2.5, 300.
    static std::string bound(double s) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%g", s);
        return buf;
    }
    static std::string seconds(std::uint64_t ns) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%llu.%09llu", static_cast<unsigned long long>(ns / 1'000'000'000),
                      static_cast<unsigned long long>(ns % 1'000'000'000));
        return buf;
    }
    std::string out_;
};

}  // namespace

std::string client_impl::metrics_text() const {
    const counters& c = counters_;
    const detail::telemetry& t = telemetry_;
    exposition x;
    x.family("sqlock_client_info", "gauge", "The client: its backend and table prefix (always 1).");
    x.sample("sqlock_client_info", {{"dialect", dialect_->name()}, {"table_prefix", sql().prefix()}}, "1");
    x.family("sqlock_acquisitions_total", "counter",
             "try_acquire and acquire calls, by outcome: acquired (a grant), reentered (the thread's own grant "
             "reused), busy (try_acquire found the key held), timeout, cancelled, error (the call threw).");
    for (std::size_t i = 0; i < acquire_outcome_names.size(); ++i)
        x.sample("sqlock_acquisitions_total", {{"outcome", acquire_outcome_names[i]}},
                 std::to_string(t.outcomes[i].load()));
    x.counter("sqlock_contention_misses_total", "Grant attempts that found the key held.", c.contention_misses.load());
    x.counter("sqlock_releases_total", "Leases released.", c.releases.load());
    x.counter("sqlock_renewals_total", "Leases renewed (automatically or by renew()), select_for_update pings included.",
              c.renewals.load());
    x.counter("sqlock_renewal_failures_total",
              "Automatic renewals that failed for a passing reason and were retried.", c.renewal_failures.load());
    x.family("sqlock_leases_lost_total", "counter",
             "Leases lost, by cause: not_held (a renewal or release matched no row), deadline (the local deadline "
             "passed), forced (select_for_update: force-released), connection_lost (select_for_update).");
    for (loss_cause cause : loss_causes)
        x.sample("sqlock_leases_lost_total", {{"cause", to_string(cause)}},
                 std::to_string(t.lost[static_cast<std::size_t>(cause)].load()));
    x.gauge("sqlock_leases_held", "Leases held now: granted, neither released nor lost.", t.held.load());
    x.gauge("sqlock_waiters", "Tickets this client holds in the wait queue now (blocking acquires queued).",
            t.waiters.load());
    x.counter("sqlock_waits_total", "Tickets taken in the wait queue.", c.waits.load());
    x.counter("sqlock_wakeups_total", "Wake-up notifications received by the client's listener.", c.wakeups.load());
    x.counter("sqlock_rows_swept_total", "Expired rows deleted by this client's sweeper.", c.rows_swept.load());
    x.counter("sqlock_statements_total", "Statements sent to the database.", c.statements.load());
    x.counter("sqlock_watchdog_rounds_total", "Watchdog rounds that renewed or pinged at least one lease.",
              watchdog_ticks());
    x.counter("sqlock_events_dropped_total", "Events dropped because the listener was too far behind.",
              t.events_dropped.load());
    x.histogram("sqlock_acquire_wait_seconds",
                "Time blocking acquire calls took, whatever their outcome (try_acquire not included).", t.wait);
    x.histogram("sqlock_hold_seconds", "Time from a grant to its release or loss.", t.hold);
    x.histogram("sqlock_renewal_seconds",
                "Round trip of renewal statements and select_for_update pings that answered (one per batch).",
                t.renewal);
    return x.take();
}

}  // namespace sqlock::detail
