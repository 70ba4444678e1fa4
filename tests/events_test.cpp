// Lock events (client_options::on_event) and the client's metrics
// (client::metrics_text()), checked with a strict parser of the Prometheus
// text format written here.

#include "support/doctest_types.hpp"
#include "support/helpers.hpp"

#include "core/telemetry.hpp"

#include <sqlock/sqlock.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sqlock::event_kind;
using sqlock::loss_cause;
using sqlock::mode;
using sqlock::wait_outcome;

namespace {

// --- a strict parser of the Prometheus text exposition format 0.0.4 ------------

struct prom_sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};

struct prom_text {
    std::map<std::string, std::string> types;  // family -> counter | gauge | histogram
    std::vector<prom_sample> samples;

    // The value of the one sample with exactly these labels; throws unless there is exactly one.
    double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
        const prom_sample* found = nullptr;
        for (const auto& s : samples)
            if (s.name == name && s.labels == labels) {
                if (found) throw std::runtime_error("two samples " + name);
                found = &s;
            }
        if (!found) throw std::runtime_error("no sample " + name);
        return found->value;
    }
    std::uint64_t count(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
        return static_cast<std::uint64_t>(value(name, labels));
    }
};

[[noreturn]] void bad(std::size_t line, const std::string& why) {
    throw std::runtime_error("line " + std::to_string(line) + ": " + why);
}

bool metric_name_ok(std::string_view n) {
    if (n.empty()) return false;
    auto first = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
    if (!first(n[0])) return false;
    return std::all_of(n.begin() + 1, n.end(),
                       [&](char c) { return first(c) || std::isdigit(static_cast<unsigned char>(c)); });
}

bool label_name_ok(std::string_view n) {
    if (n.empty() || n.starts_with("__")) return false;
    auto first = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
    if (!first(n[0])) return false;
    return std::all_of(n.begin() + 1, n.end(),
                       [&](char c) { return first(c) || std::isdigit(static_cast<unsigned char>(c)); });
}

double parse_value(std::size_t ln, const std::string& v) {
    if (v == "+Inf") return HUGE_VAL;
    if (v == "-Inf") return -HUGE_VAL;
    if (v == "NaN") return std::nan("");
    if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) bad(ln, "empty value");
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end != v.c_str() + v.size()) bad(ln, "not a number: '" + v + "'");
    if (std::isnan(d) || std::isinf(d)) bad(ln, "a float spelt other than +Inf, -Inf, NaN: '" + v + "'");
    return d;
}

// Every line is `# HELP name text`, `# TYPE name counter|gauge|histogram`
// or `name{labels} value`; names and label names are valid; label values
// escape only \\, \" and \n; every sample's family has a TYPE given before
// it; a family's lines are contiguous; no series repeats; counters end in
// _total and are not negative; every name starts with sqlock_; a
// histogram's buckets per series rise in le, are cumulative (non-decreasing)
// and end with le="+Inf", which equals its _count, and it has a _sum.
prom_text parse_strict(const std::string& text) {
    prom_text out;
    if (text.empty() || text.back() != '\n') bad(0, "the text must end with a line feed");
    std::set<std::string> helped, closed, series;
    std::string current;  // the family whose lines are being read
    auto enter = [&](std::size_t ln, const std::string& family) {
        if (family == current) return;
        if (closed.count(family)) bad(ln, "family " + family + " is not contiguous");
        if (!current.empty()) closed.insert(current);
        current = family;
    };
    std::size_t ln = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        ++ln;
        if (line.empty()) bad(ln, "empty line");
        if (line[0] == '#') {
            std::istringstream words(line);
            std::string hash, keyword, name;
            words >> hash >> keyword >> name;
            if (hash != "#" || (keyword != "HELP" && keyword != "TYPE")) bad(ln, "a comment other than HELP or TYPE");
            const std::string head = "# " + keyword + " " + name;
            if (!line.starts_with(head + " ")) bad(ln, "malformed " + keyword);
            if (!metric_name_ok(name)) bad(ln, "bad metric name '" + name + "'");
            if (!name.starts_with("sqlock_")) bad(ln, "name without the sqlock_ prefix");
            const std::string rest = line.substr(head.size() + 1);
            enter(ln, name);
            if (keyword == "HELP") {
                if (!helped.insert(name).second) bad(ln, "second HELP for " + name);
                if (rest.empty()) bad(ln, "empty HELP");
                for (std::size_t i = 0; i < rest.size(); ++i)
                    if (rest[i] == '\\' && (i + 1 == rest.size() || (rest[i + 1] != '\\' && rest[i + 1] != 'n')))
                        bad(ln, "bad escape in HELP");
                    else if (rest[i] == '\\')
                        ++i;
            } else {
                if (rest != "counter" && rest != "gauge" && rest != "histogram") bad(ln, "bad TYPE '" + rest + "'");
                if (out.types.count(name)) bad(ln, "second TYPE for " + name);
                for (const auto& s : out.samples)
                    for (const char* suffix : {"", "_bucket", "_sum", "_count"})
                        if (s.name == name + suffix) bad(ln, "TYPE after samples of " + name);
                out.types[name] = rest;
            }
            continue;
        }
        prom_sample s;
        std::size_t i = 0;
        while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
        s.name = line.substr(0, i);
        if (!metric_name_ok(s.name)) bad(ln, "bad metric name '" + s.name + "'");
        if (i < line.size() && line[i] == '{') {
            ++i;
            for (;;) {
                std::size_t eq = line.find('=', i);
                if (eq == std::string::npos) bad(ln, "label without '='");
                const std::string lname = line.substr(i, eq - i);
                if (!label_name_ok(lname)) bad(ln, "bad label name '" + lname + "'");
                i = eq + 1;
                if (i >= line.size() || line[i] != '"') bad(ln, "label value not quoted");
                ++i;
                std::string v;
                for (;;) {
                    if (i >= line.size()) bad(ln, "unterminated label value");
                    const char c = line[i++];
                    if (c == '"') break;
                    if (c == '\\') {
                        if (i >= line.size()) bad(ln, "dangling backslash");
                        const char e = line[i++];
                        if (e == '\\') v += '\\';
                        else if (e == '"') v += '"';
                        else if (e == 'n') v += '\n';
                        else bad(ln, "bad escape in a label value");
                    } else {
                        v += c;
                    }
                }
                if (!s.labels.emplace(lname, v).second) bad(ln, "label " + lname + " twice");
                if (i >= line.size()) bad(ln, "unterminated labels");
                if (line[i] == ',') {
                    ++i;
                    continue;
                }
                if (line[i] == '}') {
                    ++i;
                    break;
                }
                bad(ln, "expected ',' or '}'");
            }
        }
        if (i >= line.size() || line[i] != ' ') bad(ln, "no space before the value");
        const std::string value = line.substr(i + 1);
        if (value.find(' ') != std::string::npos) bad(ln, "a timestamp or trailing text");
        s.value = parse_value(ln, value);

        std::string family;
        if (out.types.count(s.name) && out.types[s.name] != "histogram") {
            family = s.name;
            if (out.types[s.name] == "counter") {
                if (!s.name.ends_with("_total")) bad(ln, "counter without _total: " + s.name);
                if (!(s.value >= 0)) bad(ln, "negative counter");
            }
        } else {
            for (const char* suffix : {"_bucket", "_sum", "_count"})
                if (s.name.ends_with(suffix)) {
                    const std::string base = s.name.substr(0, s.name.size() - std::string(suffix).size());
                    if (out.types.count(base) && out.types[base] == "histogram") family = base;
                }
            if (family.empty()) bad(ln, "sample " + s.name + " of a family without TYPE");
            if (s.name.ends_with("_bucket") != (s.labels.count("le") == 1)) bad(ln, "le on a non-bucket, or not on a bucket");
        }
        enter(ln, family);
        std::string id = s.name;
        for (const auto& [k, v] : s.labels) id += "|" + k + "=" + v;
        if (!series.insert(id).second) bad(ln, "series repeated: " + id);
        out.samples.push_back(std::move(s));
    }
    for (const auto& [family, type] : out.types) {
        if (!helped.count(family)) bad(0, "no HELP for " + family);
        if (type != "histogram") continue;
        // Per series (labels other than le): buckets in order, cumulative, ending at +Inf == _count.
        std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
        for (const auto& s : out.samples)
            if (s.name == family + "_bucket") {
                auto rest = s.labels;
                const std::string le = rest["le"];
                rest.erase("le");
                buckets[rest].emplace_back(le == "+Inf" ? HUGE_VAL : parse_value(0, le), s.value);
            }
        if (buckets.empty()) bad(0, "histogram " + family + " without buckets");
        for (const auto& [labels, bs] : buckets) {
            for (std::size_t k = 1; k < bs.size(); ++k) {
                if (!(bs[k].first > bs[k - 1].first)) bad(0, family + ": le not increasing");
                if (bs[k].second < bs[k - 1].second) bad(0, family + ": buckets not cumulative");
            }
            if (!std::isinf(bs.back().first)) bad(0, family + ": the last bucket is not le=\"+Inf\"");
            if (bs.back().second != out.value(family + "_count", labels)) bad(0, family + ": +Inf != _count");
            out.value(family + "_sum", labels);  // throws when absent
        }
    }
    return out;
}

// --- recording events -----------------------------------------------------------

struct recorder {
    std::mutex mu;
    std::vector<sqlock::lock_event> events;

    std::function<void(const sqlock::lock_event&)> listener() {
        return [this](const sqlock::lock_event& e) {
            std::lock_guard lock(mu);
            events.push_back(e);
        };
    }
    std::vector<sqlock::lock_event> of(const std::string& key) {
        std::lock_guard lock(mu);
        std::vector<sqlock::lock_event> out;
        for (const auto& e : events)
            if (e.key == key) out.push_back(e);
        return out;
    }
    std::size_t count(const std::string& key, event_kind kind) {
        std::size_t n = 0;
        for (const auto& e : of(key)) n += e.kind == kind;
        return n;
    }
    bool last_is(const std::string& key, event_kind kind) {
        const auto ev = of(key);
        return !ev.empty() && ev.back().kind == kind;
    }
};

std::string kinds(const std::vector<sqlock::lock_event>& ev) {
    std::string out;
    for (const auto& e : ev) out += std::string(out.empty() ? "" : " ") + sqlock::to_string(e.kind);
    return out;
}

template <class Db>
sqlock::client open_with(const Db& db, std::function<void(const sqlock::lock_event&)> listener, bool sweep = true) {
    auto o = db.options();
    o.sweep = sweep;
    o.on_event = std::move(listener);
    return sqlock::client::open(db.url(), o);
}

// Reads metrics_text() while the statement counter stands still around it.
template <class Client>
prom_text quiet_metrics(Client& c, std::uint64_t& statements) {
    for (;;) {
        const auto before = c.stats().statements;
        auto text = c.metrics_text();
        statements = c.stats().statements;
        if (before == statements) return parse_strict(text);
    }
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("label values are escaped for the text format") {
    CHECK(sqlock::detail::escape_label_value("plain/key") == "plain/key");
    CHECK(sqlock::detail::escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

TEST_CASE("the strict exposition parser refuses what the format does not allow") {
    const std::string ok =
        "# HELP sqlock_x_total X.\n# TYPE sqlock_x_total counter\nsqlock_x_total{a=\"q\\\"\\\\\\n\"} 1\n"
        "# HELP sqlock_h H.\n# TYPE sqlock_h histogram\nsqlock_h_bucket{le=\"1\"} 1\nsqlock_h_bucket{le=\"+Inf\"} 2\n"
        "sqlock_h_sum 3.5\nsqlock_h_count 2\n";
    const auto parsed = parse_strict(ok);
    CHECK(parsed.value("sqlock_x_total", {{"a", "q\"\\\n"}}) == 1);
    CHECK(parsed.value("sqlock_h_count") == 2);
    CHECK_THROWS(parse_strict("sqlock_x_total 1\n"));                                          // no TYPE
    CHECK_THROWS(parse_strict("# HELP sqlock_x X.\n# TYPE sqlock_x counter\nsqlock_x 1\n"));   // no _total
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\nsqlock_g 1"));      // no final line feed
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\nsqlock_g{a=\"x\"y\"} 1\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\nsqlock_g{a=\"\\t\"} 1\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\n1sqlock_g 1\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\nsqlock_g one\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\nsqlock_g 1 1700000000\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\n# a remark\nsqlock_g 1\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g gauge\nsqlock_g 1\nsqlock_g 2\n"));
    CHECK_THROWS(parse_strict("# HELP sqlock_g G.\n# TYPE sqlock_g summary\nsqlock_g 1\n"));
    auto histogram = [](const std::string& buckets, const std::string& count) {
        return "# HELP sqlock_h H.\n# TYPE sqlock_h histogram\n" + buckets + "sqlock_h_sum 1\nsqlock_h_count " + count +
               "\n";
    };
    CHECK_NOTHROW(parse_strict(histogram("sqlock_h_bucket{le=\"1\"} 1\nsqlock_h_bucket{le=\"+Inf\"} 2\n", "2")));
    CHECK_THROWS(parse_strict(histogram("sqlock_h_bucket{le=\"1\"} 3\nsqlock_h_bucket{le=\"+Inf\"} 2\n", "2")));
    CHECK_THROWS(parse_strict(histogram("sqlock_h_bucket{le=\"1\"} 1\nsqlock_h_bucket{le=\"+Inf\"} 2\n", "3")));
    CHECK_THROWS(parse_strict(histogram("sqlock_h_bucket{le=\"1\"} 1\nsqlock_h_bucket{le=\"2\"} 2\n", "2")));
    CHECK_THROWS(parse_strict(histogram("sqlock_h_bucket{le=\"2\"} 1\nsqlock_h_bucket{le=\"1\"} 1\n"
                                        "sqlock_h_bucket{le=\"+Inf\"} 2\n",
                                        "2")));
    // A family's lines are contiguous.
    CHECK_THROWS(parse_strict("# HELP sqlock_a A.\n# TYPE sqlock_a gauge\n# HELP sqlock_b B.\n# TYPE sqlock_b gauge\n"
                              "sqlock_b 1\nsqlock_a 1\n"));
}

}  // TEST_SUITE

TEST_SUITE("events") {

TEST_CASE_TEMPLATE("events arrive in order for acquire, renewals and release", Db, ALL_BACKENDS) {
    Db db;
    recorder rec;
    auto c = open_with(db, rec.listener());
    for (mode m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        const std::string key = std::string("events/order/") + sqlock::to_string(m);
        auto l = c.try_acquire(key, {.mode = m, .lease = 3s, .renew_interval = 100ms});
        REQUIRE(l);
        REQUIRE(test::eventually([&] { return rec.count(key, event_kind::renewed) >= 2; }));
        l->release();
        REQUIRE(test::eventually([&] { return rec.last_is(key, event_kind::released); }));

        const auto ev = rec.of(key);
        CAPTURE(kinds(ev));
        REQUIRE(ev.size() >= 4);
        CHECK(ev.front().kind == event_kind::acquired);
        CHECK(ev.back().kind == event_kind::released);
        for (std::size_t i = 1; i + 1 < ev.size(); ++i) CHECK(ev[i].kind == event_kind::renewed);
        for (const auto& e : ev) {
            CHECK(e.key == key);
            CHECK(e.token == l->token());
            CHECK(e.owner == l->owner());
            CHECK(e.mode == m);
            CHECK(e.cause == loss_cause::none);
        }
        const auto& acquired = ev.front();
        CHECK(acquired.db_time > 0ns);
        CHECK(acquired.wait >= acquired.db_time);  // the call began before its statement was sent
        for (std::size_t i = 1; i + 1 < ev.size(); ++i) CHECK(ev[i].db_time > 0ns);
        CHECK(ev.back().hold > 0ns);
        CHECK(ev.back().db_time > 0ns);
        CHECK(ev.back().error.empty());
    }
}

TEST_CASE_TEMPLATE("a blocking acquire tells that it queued and how its wait ended", Db, ALL_BACKENDS) {
    Db db;
    recorder rec;
    auto holder = db.open();
    auto c = open_with(db, rec.listener(), false);
    const std::string key = "events/wait";
    auto held = holder.try_acquire(key);
    REQUIRE(held);

    // A wait that times out.
    CHECK_THROWS_AS((void)c.acquire(key, 100ms, {.fair = true}), sqlock::timeout_error);
    REQUIRE(test::eventually([&] { return rec.last_is(key, event_kind::waited); }));
    {
        const auto ev = rec.of(key);
        CAPTURE(kinds(ev));
        REQUIRE(ev.size() == 2);
        CHECK(ev[0].kind == event_kind::queued);
        CHECK(ev[0].ticket > 0);
        CHECK(ev[0].token == 0);
        CHECK(ev[1].outcome == wait_outcome::timed_out);
        CHECK(ev[1].token == 0);
        CHECK(ev[1].wait >= 100ms);  // acquire() gives up only once its timeout has passed
    }

    // A wait that ends with the key.
    std::uint64_t statements = 0;
    std::optional<sqlock::lease> got;
    std::thread waiter([&] { got.emplace(c.acquire(key, 30s, {.fair = true})); });
    REQUIRE(test::eventually([&] { return rec.count(key, event_kind::queued) == 2; }));
    CHECK(quiet_metrics(c, statements).value("sqlock_waiters") == 1);
    held->release();
    waiter.join();
    REQUIRE(got);
    REQUIRE(test::eventually([&] { return rec.of(key).size() == 5; }));
    const auto ev = rec.of(key);
    CAPTURE(kinds(ev));
    CHECK(ev[2].kind == event_kind::queued);
    CHECK(ev[3].kind == event_kind::acquired);
    CHECK(ev[3].token == got->token());
    CHECK(ev[4].kind == event_kind::waited);
    CHECK(ev[4].outcome == wait_outcome::acquired);
    CHECK(ev[4].token == got->token());
    CHECK(ev[4].owner == got->owner());
    CHECK(ev[4].wait >= ev[3].db_time);

    const auto m = quiet_metrics(c, statements);
    CHECK(m.value("sqlock_waiters") == 0);
    CHECK(m.count("sqlock_waits_total") == 2);
    CHECK(m.count("sqlock_waits_total") == c.stats().waits);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "timeout"}}) == 1);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "acquired"}}) == 1);
    CHECK(m.count("sqlock_acquire_wait_seconds_count") == 2);
    CHECK(m.value("sqlock_acquire_wait_seconds_sum") >= 0.1);  // the timed-out call alone waited 100 ms
    CHECK(m.value("sqlock_leases_held") == 1);
}

TEST_CASE_TEMPLATE("a force-released lease tells its loss and why", Db, ALL_BACKENDS) {
    Db db;
    recorder rec;
    auto c = open_with(db, rec.listener());
    auto breaker = db.open();
    for (mode m : test::modes_of(db)) {
        CAPTURE(std::string(sqlock::to_string(m)));
        const std::string key = std::string("events/forced/") + sqlock::to_string(m);
        auto l = c.try_acquire(key, {.mode = m, .lease = 10s, .renew_interval = 100ms});
        REQUIRE(l);
        CHECK(breaker.force_release(key, "events test") > l->token());
        REQUIRE(test::eventually([&] { return rec.count(key, event_kind::lost) == 1; }));
        CHECK(l->lost());  // long before the deadline: the watchdog found out
        l->release();
        REQUIRE(test::eventually([&] { return rec.last_is(key, event_kind::released); }));
        const auto ev = rec.of(key);
        CAPTURE(kinds(ev));
        REQUIRE(ev.size() >= 3);
        const auto& lost = ev[ev.size() - 2];
        CHECK(lost.kind == event_kind::lost);
        // A lease mode's renewal only sees its row gone; a row lock holder reads the new token.
        CHECK(lost.cause == (m == mode::select_for_update ? loss_cause::forced : loss_cause::not_held));
        CHECK(lost.token == l->token());
        CHECK(lost.hold > 0ns);
        CHECK(ev.front().kind == event_kind::acquired);
    }
    std::uint64_t statements = 0;
    const auto metrics = quiet_metrics(c, statements);
    const double forced = db.row_locks() ? 1 : 0;
    CHECK(metrics.value("sqlock_leases_lost_total", {{"cause", "forced"}}) == forced);
    CHECK(metrics.value("sqlock_leases_lost_total", {{"cause", "not_held"}}) == 2);
    CHECK(metrics.value("sqlock_leases_lost_total", {{"cause", "deadline"}}) == 0);
}

TEST_CASE_TEMPLATE("a lease whose deadline passes tells its loss by deadline", Db, ALL_BACKENDS) {
    Db db;
    recorder rec;
    auto c = open_with(db, rec.listener());
    auto l = c.try_acquire("events/deadline", {.lease = 300ms, .auto_renew = false});
    REQUIRE(l);
    REQUIRE(test::eventually([&] { return rec.count("events/deadline", event_kind::lost) == 1; }));
    const auto ev = rec.of("events/deadline");
    CAPTURE(kinds(ev));
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].kind == event_kind::acquired);
    CHECK(ev[1].cause == loss_cause::deadline);
    CHECK(ev[1].hold > 0ns);
    CHECK(l->lost());
}

TEST_CASE_TEMPLATE("a throwing listener breaks neither renewals nor later events", Db, ALL_BACKENDS) {
    Db db;
    std::atomic<int> calls{0};
    auto c = open_with(db, [&](const sqlock::lock_event& e) {
        ++calls;
        if (e.kind == event_kind::renewed && calls % 2 == 0) throw 42;  // not even a std::exception
        throw std::runtime_error("listener failure");
    });
    auto l = c.try_acquire("events/throwing", {.lease = 600ms});
    REQUIRE(l);
    REQUIRE(test::eventually([&] { return c.stats().renewals >= 4; }));
    CHECK_FALSE(l->lost());
    CHECK(c.stats().leases_lost == 0);
    REQUIRE(test::eventually([&] { return calls.load() >= 5; }));  // acquired, then every renewal
    const int before = calls.load();
    l->release();
    CHECK(test::eventually([&] { return calls.load() > before; }));  // the released event still comes
}

TEST_CASE_TEMPLATE("a slow listener delays neither on_lost, the stop token nor renewals", Db, ALL_BACKENDS) {
    Db db;
    std::atomic<bool> unblock{false};
    std::atomic<int> calls{0};
    recorder rec;
    auto record = rec.listener();
    auto c = open_with(db, [&](const sqlock::lock_event& e) {
        ++calls;
        record(e);
        test::eventually([&] { return unblock.load(); }, 60s);  // the first event blocks it until told
    });
    // Declared after the client, so destroyed before it: a failing check
    // must not leave the client's destructor waiting for the listener.
    struct unblock_at_exit {
        std::atomic<bool>& flag;
        ~unblock_at_exit() { flag = true; }
    } guard{unblock};
    std::atomic<bool> on_lost{false};
    auto doomed = c.try_acquire("events/doomed", {.lease = 300ms,
                                                  .auto_renew = false,
                                                  .on_lost = [&](const std::string&, std::int64_t) { on_lost = true; }});
    REQUIRE(doomed);
    auto kept = c.try_acquire("events/kept", {.lease = 600ms});
    REQUIRE(kept);
    REQUIRE(test::eventually([&] { return calls.load() == 1; }));
    const auto stop = doomed->stop_token();
    const auto renewals = c.stats().renewals;
    REQUIRE(test::eventually([&] { return on_lost.load(); }));
    CHECK(stop.stop_requested());
    REQUIRE(test::eventually([&] { return c.stats().renewals >= renewals + 3; }));
    CHECK_FALSE(kept->lost());
    CHECK(calls.load() == 1);  // all the while the listener was still stuck in its first event
    unblock = true;
    REQUIRE(test::eventually([&] { return rec.count("events/doomed", event_kind::lost) == 1; }));
    CHECK(rec.of("events/doomed").back().cause == loss_cause::deadline);
    CHECK(rec.count("events/kept", event_kind::renewed) >= 3);  // told late, but told
}

// The client_impl can outlive the application's last handle for a moment:
// here an on_lost callback still running holds it (so would a watchdog tick
// in flight). The listener must fall silent all the same when the last
// handle goes, since it may capture the application's objects by reference.
TEST_CASE_TEMPLATE("no listener call follows the destruction of the last client handle and lease", Db, ALL_BACKENDS) {
    Db db;
    std::atomic<bool> destroying{false}, gone{false}, on_lost_in{false}, on_lost_go{false}, on_lost_out{false};
    std::atomic<int> late{0}, told{0};
    auto sentinel = std::make_shared<int>(0);  // lives as long as the listener does
    const std::weak_ptr<int> listener_alive = sentinel;
    {
        auto c = open_with(db, [&, sentinel](const sqlock::lock_event&) {
            if (gone) ++late;
            // Every event waits for the destruction to begin, then long enough
            // for a destructor that does not wait for it to return.
            test::eventually([&] { return destroying.load(); }, 60s);
            std::this_thread::sleep_for(100ms);
            ++told;
        });
        sentinel.reset();
        auto l = c.try_acquire("events/outlived", {.lease = 300ms,
                                                  .auto_renew = false,
                                                  .on_lost = [&](const std::string&, std::int64_t) {
                                                      on_lost_in = true;
                                                      test::eventually([&] { return on_lost_go.load(); }, 60s);
                                                      on_lost_out = true;
                                                  }});
        REQUIRE(l);
        REQUIRE(test::eventually([&] { return on_lost_in.load(); }));  // `lost` is queued behind `acquired`
        destroying = true;
    }  // the lease, then the client: the on_lost closure still holds the client_impl
    gone = true;
    REQUIRE(test::eventually([&] { return told.load() >= 1; }));
    // A listener still running would now be told `lost`, which is queued.
    CHECK_FALSE(test::eventually([&] { return late.load() > 0; }, 500ms));
    on_lost_go = true;
    REQUIRE(test::eventually([&] { return on_lost_out.load(); }));
    REQUIRE(test::eventually([&] { return listener_alive.expired(); }));  // the client_impl is gone too
    CHECK(late.load() == 0);
}

TEST_CASE_TEMPLATE("metrics_text is valid exposition text that counts what was done", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open_quiet();  // no sweeper: nothing sends statements behind the test's back
    // Not moved anywhere: a moved lease is not reentered (m/b is, below).
    auto a = c.try_acquire("m/a");
    auto b = c.try_acquire("m/b");
    auto d = c.try_acquire("m/c");
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(d);
    CHECK_FALSE(c.try_acquire("m/a", {.reentrant = false}));                                   // busy
    CHECK_THROWS_AS((void)c.acquire("m/a", 50ms, {.reentrant = false}), sqlock::timeout_error);  // timeout
    CHECK_THROWS_AS((void)c.try_acquire(""), sqlock::config_error);                            // error
    {
        auto again = c.try_acquire("m/b");  // the thread's own grant: reentered
        REQUIRE(again);
    }
    std::uint64_t statements = 0;
    auto m = quiet_metrics(c, statements);
    CHECK(m.value("sqlock_leases_held") == 3);
    CHECK(m.count("sqlock_hold_seconds_count") == 0);
    for (auto* l : {&a, &b, &d}) (*l)->release();

    m = quiet_metrics(c, statements);
    const auto s = c.stats();
    CHECK(m.types.at("sqlock_acquisitions_total") == "counter");
    CHECK(m.types.at("sqlock_hold_seconds") == "histogram");
    CHECK(m.types.at("sqlock_waiters") == "gauge");
    CHECK(m.value("sqlock_client_info", {{"dialect", std::string(c.dialect())}, {"table_prefix", db.prefix}}) == 1);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "acquired"}}) == 3);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "acquired"}}) == s.acquisitions);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "busy"}}) == 1);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "timeout"}}) == 1);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "error"}}) == 1);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "reentered"}}) == 1);
    CHECK(m.count("sqlock_acquisitions_total", {{"outcome", "cancelled"}}) == 0);
    CHECK(m.count("sqlock_contention_misses_total") == s.contention_misses);
    CHECK(m.count("sqlock_contention_misses_total") >= 2);
    CHECK(m.count("sqlock_releases_total") == 3);
    CHECK(m.count("sqlock_statements_total") == statements);
    CHECK(statements == s.statements);
    CHECK(m.count("sqlock_hold_seconds_count") == 3);
    CHECK(m.value("sqlock_hold_seconds_sum") > 0);
    CHECK(m.value("sqlock_leases_held") == 0);
    CHECK(m.count("sqlock_acquire_wait_seconds_count") == 1);  // acquire() only, not try_acquire()
    CHECK(m.value("sqlock_acquire_wait_seconds_sum") >= 0.05);  // it waited out its timeout
    for (const char* cause : {"not_held", "deadline", "forced", "connection_lost"})
        CHECK(m.count("sqlock_leases_lost_total", {{"cause", cause}}) == 0);
    CHECK(m.count("sqlock_events_dropped_total") == 0);
}

TEST_CASE_TEMPLATE("renewal, loss and sweep metrics match what happened", Db, ALL_BACKENDS) {
    Db db;
    auto c = db.open_quiet();
    auto renewed = c.try_acquire("m/renewed", {.lease = 3s, .renew_interval = 100ms});
    auto fixed = c.try_acquire("m/fixed", {.mode = mode::unique_insert, .lease = 200ms, .auto_renew = false});
    REQUIRE(renewed);
    REQUIRE(fixed);
    REQUIRE(test::eventually([&] { return c.stats().renewals >= 3 && c.stats().leases_lost == 1; }));
    renewed->release();
    REQUIRE(test::eventually([&] { return c.sweep() == 1; }));  // the lost lease's row, once expired in the database

    std::uint64_t statements = 0;
    const auto m = quiet_metrics(c, statements);
    const auto s = c.stats();
    CHECK(m.count("sqlock_renewals_total") == s.renewals);
    // One lease renewed at a time: a statement per renewal (and perhaps one
    // per failed attempt that got an answer, a locked row).
    CHECK(m.count("sqlock_renewal_seconds_count") >= s.renewals);
    CHECK(m.count("sqlock_renewal_seconds_count") <= s.renewals + s.renewal_failures);
    CHECK(m.value("sqlock_renewal_seconds_sum") > 0);
    CHECK(m.count("sqlock_renewal_failures_total") == s.renewal_failures);
    CHECK(m.count("sqlock_leases_lost_total", {{"cause", "deadline"}}) == 1);
    CHECK(m.count("sqlock_leases_lost_total", {{"cause", "not_held"}}) == 0);
    CHECK(m.count("sqlock_hold_seconds_count") == 2);  // one released, one lost
    CHECK(m.value("sqlock_leases_held") == 0);
    CHECK(m.count("sqlock_rows_swept_total") == 1);
    CHECK(m.count("sqlock_rows_swept_total") == s.rows_swept);
    CHECK(m.count("sqlock_watchdog_rounds_total") == s.watchdog_ticks);
    CHECK(m.count("sqlock_statements_total") == s.statements);
    fixed->release();  // a lost lease's hold was counted once, at the loss
    CHECK(quiet_metrics(c, statements).count("sqlock_hold_seconds_count") == 2);
}

}  // TEST_SUITE
