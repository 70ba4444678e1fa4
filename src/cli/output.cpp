#include "cli/output.hpp"

#include "cli/duration.hpp"
#include "core/validate.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>

namespace sqlock::cli {
namespace {

using sys_ms = std::chrono::sys_time<std::chrono::milliseconds>;

std::string iso(const std::optional<sys_ms>& t) {
    if (!t) return "";
    const auto day = std::chrono::floor<std::chrono::days>(*t);
    const std::chrono::year_month_day ymd(day);
    const std::chrono::hh_mm_ss hms(*t - day);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()), static_cast<int>(hms.subseconds().count()));
    return buf;
}

// Columns padded to their widest cell; control characters in keys and
// results are shown escaped so that a key cannot forge table lines.
class table {
public:
    explicit table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    std::string str() const {
        std::vector<std::size_t> width(rows_.front().size(), 0);
        for (const auto& r : rows_)
            for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], printable(r[i]).size());
        std::string out;
        for (const auto& r : rows_) {
            std::string line;
            for (std::size_t i = 0; i < r.size(); ++i) {
                auto cell = printable(r[i]);
                line += cell;
                if (i + 1 < r.size()) line += std::string(width[i] - cell.size() + 2, ' ');
            }
            while (!line.empty() && line.back() == ' ') line.pop_back();
            out += line + "\n";
        }
        return out;
    }

private:
    static std::string printable(const std::string& s) { return terminal_text(s); }
    std::vector<std::vector<std::string>> rows_;
};

}  // namespace

std::string terminal_text(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    auto escape = [&](const char* format, std::uint32_t value) {
        char buf[12];
        std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(value));
        out += buf;
    };
    for (std::size_t at = 0; at < s.size();) {
        std::uint32_t cp = 0;
        const std::size_t n = detail::utf8_sequence(s, at, &cp);
        if (n == 0) escape("\\x%02x", static_cast<unsigned char>(s[at]));  // not UTF-8: the byte
        else if (cp < 0x20 || cp == 0x7f) escape("\\x%02x", cp);            // C0 and DEL
        else if (cp >= 0x80 && cp <= 0x9f) escape("\\u%04x", cp);          // C1
        else out.append(s.substr(at, n));
        at += n == 0 ? 1 : n;
    }
    return out;
}

namespace {

std::string clip(const std::string& s, std::size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

nlohmann::json run_json(const job_record& r) {
    return {{"job", r.job},           {"run_key", r.run_key},       {"status", to_string(r.status)},
            {"attempts", r.attempts}, {"token", r.token},           {"owner", r.owner},
            {"holder", r.holder},     {"started_at", iso(r.started_at)}, {"finished_at", iso(r.finished_at)},
            {"retry_at", iso(r.retry_at)}, {"result", r.result},    {"last_error", r.last_error}};
}

void add_run_rows(table& t, const std::vector<job_record>& runs) {
    for (const auto& r : runs)
        t.add({r.job, r.run_key, to_string(r.status), std::to_string(r.attempts), std::to_string(r.token), r.holder,
               iso(r.started_at), iso(r.finished_at), clip(r.status == run_status::succeeded ? r.result : r.last_error, 60)});
}

const std::vector<std::string> run_header{"JOB",   "RUN KEY", "STATUS",   "ATTEMPTS", "TOKEN",
                                          "HOLDER", "STARTED", "FINISHED", "RESULT / LAST ERROR"};

// Serialised with invalid UTF-8 replaced, never thrown on.
std::string dump(const nlohmann::json& j) {
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string iso8601(std::chrono::sys_time<std::chrono::milliseconds> t) { return iso(t); }

std::string status_table(const snapshot& s) {
    std::string out = "database time " + iso(s.now) + "\n\n";
    auto count = [](std::size_t n, bool more) {
        return "(" + std::to_string(n) + (more ? " shown; more not shown: raise --limit" : "") + ")\n";
    };
    out += "HELD LOCKS " + count(s.locks.size(), s.more_locks);
    if (!s.locks.empty()) {
        table t({"KEY", "MODE", "HOLDER", "TOKEN", "LEFT", "NOTE"});
        for (const auto& l : s.locks)
            t.add({l.key, l.mode, l.holder, std::to_string(l.token),
                   l.expires_in.count() > 0 ? format_duration(l.expires_in) : "row lock", clip(l.note, 40)});
        out += t.str();
    }
    out += "\nSHARED HOLDERS AND PERMITS " + count(s.holders.size(), s.more_holders);
    if (!s.holders.empty()) {
        table t({"KEY", "KIND", "PERMITS", "HOLDER", "TOKEN", "LEFT", "NOTE"});
        for (const auto& h : s.holders)
            t.add({h.key, to_string(h.kind), h.permits > 0 ? std::to_string(h.permits) : "", h.holder,
                   std::to_string(h.token), format_duration(h.expires_in), clip(h.note, 40)});
        out += t.str();
    }
    out += "\nWAITERS " + count(s.waiters.size(), s.more_waiters);
    if (!s.waiters.empty()) {
        table t({"KEY", "#", "TICKET", "FAIR", "PRIORITY", "HOLDER", "WAITING"});
        std::string last;
        int place = 0;
        for (const auto& w : s.waiters) {
            place = w.key == last ? place + 1 : 1;
            last = w.key;
            t.add({w.key, std::to_string(place), std::to_string(w.ticket), w.fair ? "yes" : "no",
                   w.fair ? std::to_string(w.priority) : "", w.holder, format_duration(w.waited)});
        }
        out += t.str();
    }
    out += "\nRECENT JOB RUNS " + count(s.runs.size(), s.more_runs);
    if (!s.runs.empty()) {
        table t(run_header);
        add_run_rows(t, s.runs);
        out += t.str();
    }
    return out;
}

std::string status_json(const snapshot& s) {
    nlohmann::json j{{"database_time", iso(s.now)},
                     {"locks", nlohmann::json::array()},
                     {"waiters", nlohmann::json::array()},
                     {"holders", nlohmann::json::array()},
                     {"runs", nlohmann::json::array()},
                     {"truncated",
                      {{"locks", s.more_locks},
                       {"waiters", s.more_waiters},
                       {"holders", s.more_holders},
                       {"runs", s.more_runs}}}};
    for (const auto& h : s.holders)
        j["holders"].push_back({{"key", h.key},
                                {"kind", to_string(h.kind)},
                                {"permits", h.permits},
                                {"owner", h.owner},
                                {"holder", h.holder},
                                {"token", h.token},
                                {"expires_in_ms", h.expires_in.count()},
                                {"note", h.note}});
    for (const auto& l : s.locks)
        j["locks"].push_back({{"key", l.key},
                              {"mode", l.mode},
                              {"owner", l.owner},
                              {"holder", l.holder},
                              {"token", l.token},
                              {"expires_in_ms", l.expires_in.count()},
                              {"note", l.note}});
    for (const auto& w : s.waiters)
        j["waiters"].push_back({{"key", w.key},
                                {"ticket", w.ticket},
                                {"owner", w.owner},
                                {"holder", w.holder},
                                {"fair", w.fair},
                                {"priority", w.priority},
                                {"waited_ms", w.waited.count()}});
    for (const auto& r : s.runs) j["runs"].push_back(run_json(r));
    return dump(j);
}

std::string runs_table(const std::vector<job_record>& runs) {
    if (runs.empty()) return "no job runs recorded\n";
    table t(run_header);
    add_run_rows(t, runs);
    return t.str();
}

std::string runs_json(const std::vector<job_record>& runs) {
    auto j = nlohmann::json::array();
    for (const auto& r : runs) j.push_back(run_json(r));
    return dump(j);
}

namespace {

// The Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): a label
// value escapes backslash, double quote and line feed; HELP text backslash
// and line feed.
std::string escaped(std::string_view text, bool quote) {
    std::string out;
    for (char c : text) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '"' && quote) out += "\\\"";
        else out += c;
    }
    return out;
}

std::string seconds(std::chrono::milliseconds ms) {
    const long long n = std::max<long long>(ms.count(), 0);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld.%03lld", n / 1000, n % 1000);
    return buf;
}

// Gauge families, each written whole: HELP, TYPE, then its samples.
class exposition {
public:
    using labels = std::vector<std::pair<std::string, std::string>>;
    struct sample {
        labels with;
        std::string value;
    };
    void gauge(std::string_view name, std::string_view help, const std::vector<sample>& samples) {
        if (samples.empty()) return;  // a family without samples says nothing
        const std::string n(name);
        out_ += "# HELP " + n + " " + escaped(help, false) + "\n# TYPE " + n + " gauge\n";
        for (const auto& s : samples) {
            out_ += n;
            if (!s.with.empty()) {
                out_ += '{';
                for (std::size_t i = 0; i < s.with.size(); ++i)
                    out_ += (i ? "," : "") + s.with[i].first + "=\"" + escaped(s.with[i].second, true) + "\"";
                out_ += '}';
            }
            out_ += " " + s.value + "\n";
        }
    }
    const std::string& str() const { return out_; }

private:
    std::string out_;
};

std::string count(std::int64_t n) { return std::to_string(n); }

}  // namespace

std::string status_metrics(const database_gauges& g, bool row_locks) {
    exposition e;
    e.gauge("sqlock_db_time_seconds", "The database clock when these figures were read, as a Unix time.",
            {{{}, seconds(g.now.time_since_epoch())}});
    e.gauge("sqlock_db_keys_held", "Keys held right now, by a live lease or a select_for_update row lock.",
            {{{}, count(g.keys_held())}});
    std::vector<exposition::sample> holders{{{{"mode", "conditional_update"}}, count(g.held_conditional_update)},
                                            {{{"mode", "unique_insert"}}, count(g.held_unique_insert)}};
    if (row_locks) holders.push_back({{{"mode", "select_for_update"}}, count(g.held_select_for_update)});
    e.gauge("sqlock_db_holders", "Holders of keys right now, by lock mode.", holders);
    e.gauge("sqlock_db_waiters", "Live waiters queued for keys, fair-mode ones or not.",
            {{{{"fair", "true"}}, count(g.fair_waiters)}, {{{"fair", "false"}}, count(g.waiters - g.fair_waiters)}});
    e.gauge("sqlock_db_oldest_wait_seconds", "How long the live waiter queued longest has waited (0: nobody waits).",
            {{{}, seconds(g.oldest_wait)}});
    e.gauge("sqlock_db_expired_rows",
            "Rows past their lease not yet deleted by a sweeper: unique_insert lock rows, dead waiters.",
            {{{{"table", "locks"}}, count(g.expired_locks)}, {{{"table", "waiters"}}, count(g.dead_waiters)}});
    e.gauge("sqlock_db_job_runs", "Rows of the job ledger, by status.",
            {{{{"status", "running"}}, count(g.runs_running)},
             {{{"status", "succeeded"}}, count(g.runs_succeeded)},
             {{{"status", "failed"}}, count(g.runs_failed)}});
    std::vector<exposition::sample> queue_waiters, queue_waits;
    for (const auto& q : g.queues) {
        queue_waiters.push_back({{{"key", q.key}}, count(q.waiters)});
        queue_waits.push_back({{{"key", q.key}}, seconds(q.oldest_wait)});
    }
    e.gauge("sqlock_db_queue_waiters", "Live waiters of the keys with the longest queues (at most --limit keys).",
            queue_waiters);
    e.gauge("sqlock_db_queue_oldest_wait_seconds", "How long the longest-waiting live waiter of each of those keys has waited.",
            queue_waits);
    return e.str();
}

}  // namespace sqlock::cli
