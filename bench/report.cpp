#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace bench {

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path);
    out << text;
    if (!out.flush()) failure("cannot write " + path.string());
}

namespace {

const std::vector<std::string> backends{"postgres", "mysql", "sqlite", "redis", "redis-aof"};
const std::vector<std::string> databases{"postgres", "mysql", "sqlite"};

std::string ms_text(double ms) { return number_text(ms); }

// The contender a cell is compared with, in the same workload and config.
const thread_cell* find_cell(const std::vector<thread_cell>& cells, const thread_cell& like,
                             const std::function<bool(const contender&)>& pick) {
    for (const auto& x : cells)
        if (x.workers == like.workers && x.hold_ms == like.hold_ms && pick(x.c)) return &x;
    return nullptr;
}

std::string ratio_to(const thread_cell& cell, const thread_cell* base) {
    if (!base) return "—";
    if (base == &cell) return "1";
    return ratio_text(median(cell.rates), median(base->rates));
}

const thread_cell* raw_of(const std::vector<thread_cell>& cells, const thread_cell& cell) {
    if (cell.c.kind != family::sqlock && cell.c.kind != family::raw) return nullptr;
    return find_cell(cells, cell, [&cell](const contender& o) {
        return o.kind == family::raw && o.backend == cell.c.backend && o.mode == cell.c.mode && o.relaxed == cell.c.relaxed;
    });
}

const thread_cell* native_of(const std::vector<thread_cell>& cells, const thread_cell& cell, const std::string& backend) {
    return find_cell(cells, cell, [&backend](const contender& o) { return o.kind == family::native && o.backend == backend; });
}

const thread_cell* redis_of(const std::vector<thread_cell>& cells, const thread_cell& cell) {
    return find_cell(cells, cell, [](const contender& o) { return o.backend == "redis"; });
}

// The cells of one backend's table: its own contenders, then Redis for reference.
std::vector<const thread_cell*> rows_for(const std::vector<thread_cell>& cells, const std::string& backend) {
    std::vector<const thread_cell*> out;
    for (const auto& x : cells)
        if (x.c.backend == backend) out.push_back(&x);
    return out;
}

std::vector<std::string> labels_of(const std::vector<thread_cell>& cells, const std::string& backend) {
    std::vector<std::string> out;
    for (const auto& x : cells)
        if (x.c.backend == backend && std::find(out.begin(), out.end(), x.c.label) == out.end()) out.push_back(x.c.label);
    return out;
}

std::string machine_table(const results& r) {
    std::ostringstream md;
    const machine& m = r.m;
    md << "| | |\n|---|---|\n"
       << "| CPU | " << m.cpu << "; nproc " << m.nproc << (m.virtualized ? " (virtual machine)" : "") << " |\n"
       << "| RAM | " << m.ram << " |\n"
       << "| OS | " << m.os << ", " << m.kernel << " |\n"
       << "| Disk of the data directories | " << m.disk << " |\n"
       << "| Build | " << m.compiler << ", Release |\n"
       << "| Run | " << r.started << " to " << r.finished << "; load average " << r.load_start << " at start, "
       << r.load_end << " at end |\n"
       << "| Repetitions | " << r.settings.run << " |\n";
    for (const auto& b : backends) {
        auto it = r.facts.find(b);
        if (it == r.facts.end()) continue;
        md << "| " << (b == "redis-aof" ? "Redis (fsync always)" : backend_title(b)) << " | ";
        for (std::size_t i = 0; i < it->second.size(); ++i) md << (i ? "<br>" : "") << it->second[i];
        md << " |\n";
    }
    return md.str();
}

// Uncontended and hot key: a summary grid, a chart, and every number in a
// table under <details>.
void thread_section(std::ostringstream& md, std::ostringstream& gp_all, const std::vector<thread_cell>& cells,
                    bool hot, const std::filesystem::path& dir, const std::string& img_dir,
                    const std::string& img_link, const std::string& name_override = {}) {
    std::vector<int> workers;
    std::vector<int> holds;
    for (const auto& x : cells) {
        if (std::find(workers.begin(), workers.end(), x.workers) == workers.end()) workers.push_back(x.workers);
        if (std::find(holds.begin(), holds.end(), x.hold_ms) == holds.end()) holds.push_back(x.hold_ms);
    }
    std::sort(workers.begin(), workers.end());
    std::sort(holds.begin(), holds.end());
    const std::string name = !name_override.empty() ? name_override : hot ? "hotkey" : "uncontended";
    for (const auto& b : databases) {
        auto rows = rows_for(cells, b);
        if (rows.empty()) continue;
        const auto labels = labels_of(cells, b);
        const auto redis_labels = labels_of(cells, "redis");
        const auto aof_labels = labels_of(cells, "redis-aof");
        md << "#### " << backend_title(b) << "\n\n";
        // Summary: median per contender and config.
        md << "| contender |";
        for (int h : holds)
            for (int w : workers) md << " " << w << (hot ? " w, " + std::to_string(h) + " ms" : " workers") << " |";
        md << "\n|---|";
        for (std::size_t i = 0; i < holds.size() * workers.size(); ++i) md << "---:|";
        md << "\n";
        auto summary_row = [&](const std::string& backend, const std::string& label) {
            md << "| " << label << " |";
            for (int h : holds)
                for (int w : workers) {
                    const thread_cell* x = nullptr;
                    for (const auto& y : cells)
                        if (y.c.backend == backend && y.c.label == label && y.workers == w && y.hold_ms == h) x = &y;
                    md << " " << (x ? number_text(median(x->rates)) : "—") << " |";
                }
            md << "\n";
        };
        for (const auto& l : labels) summary_row(b, l);
        for (const auto& l : redis_labels) summary_row("redis", l);
        for (const auto& l : aof_labels) summary_row("redis-aof", l);
        md << "\n" << (hot ? "Successes" : "Operations (lock + unlock)")
           << " per second, median of the repetitions; Redis rows for reference.\n\n";

        // Chart: one panel per hold (hot key) or one plot (uncontended).
        std::ostringstream gp;
        const std::string svg = name + "-" + b + ".svg";
        gp << "reset\nset terminal svg size " << (hot ? 1200 : 800) << ",460 dynamic noenhanced font 'sans,10'\n"
           << "set output \"" << img_dir << "/" << svg << "\"\n"
           << "set datafile separator '\\t'\nset logscale x 2\nset logscale y\nset grid\n"
           << "set key outside right top\nset xlabel 'worker threads'\nset xtics (";
        for (std::size_t i = 0; i < workers.size(); ++i) gp << (i ? ", " : "") << workers[i];
        gp << ")\n";
        if (hot) gp << "set multiplot layout 1," << holds.size() << " title \"" << backend_title(b) << ": one hot key, successes/s\"\n";
        else gp << "set title \"" << backend_title(b) << ": uncontended lock + unlock, operations/s\"\n";
        std::vector<std::string> all_labels = labels;
        for (const auto& l : redis_labels) all_labels.push_back(l);
        for (const auto& l : aof_labels) all_labels.push_back(l);
        for (std::size_t hi = 0; hi < holds.size(); ++hi) {
            const int h = holds[hi];
            std::ostringstream tsv;
            tsv << "workers";
            for (const auto& l : all_labels) tsv << "\t" << l;
            tsv << "\n";
            for (int w : workers) {
                tsv << w;
                for (const auto& l : all_labels) {
                    const thread_cell* x = nullptr;
                    for (const auto& y : cells)
                        if ((y.c.backend == b || y.c.backend == "redis" || y.c.backend == "redis-aof") &&
                            y.c.label == l && y.workers == w && y.hold_ms == h)
                            x = &y;
                    tsv << "\t" << (x ? format("%.1f", median(x->rates)) : "NaN");
                }
                tsv << "\n";
            }
            const std::string data = name + "-" + b + (hot ? "-hold" + std::to_string(h) : "") + ".tsv";
            write_file(dir / "data" / data, tsv.str());
            if (hot) {
                gp << "set title \"hold " << h << " ms\"\n";
                if (hi + 1 < holds.size()) gp << "unset key\n";
                else gp << "set key outside right top\n";
            }
            gp << "plot for [i=2:" << all_labels.size() + 1 << "] \"" << (dir / "data" / data).string()
               << "\" using 1:i with linespoints lw 2 title columnheader(i)\n";
        }
        if (hot) gp << "unset multiplot\n";
        gp_all << gp.str();
        md << "![" << backend_title(b) << " " << name << "](" << img_link << "/" << svg << ")\n\n";

        // Every number.
        md << "<details><summary>" << backend_title(b) << ": every number</summary>\n\n"
           << "| workers | " << (hot ? "hold ms | " : "") << "contender | " << (hot ? "successes/s" : "ops/s")
           << " median (min–max) | " << (hot ? "wait p50 / p99 µs | attempts per success" : "p50 / p99 µs")
           << " | statements per " << (hot ? "success" : "op") << " | ÷ raw SQL | ÷ "
           << (b == "postgres" ? "advisory lock" : b == "mysql" ? "GET_LOCK" : "native") << " | ÷ Redis |\n"
           << "|---:|" << (hot ? "---:|" : "") << "---|---:|---:|" << (hot ? "---:|" : "") << "---:|---:|---:|---:|\n";
        for (int h : holds)
            for (int w : workers)
                for (const auto* x : rows) {
                    if (x->workers != w || x->hold_ms != h) continue;
                    md << "| " << w << " | " << (hot ? std::to_string(h) + " | " : "") << x->c.label << " | "
                       << spread_text(spread_of(x->rates)) << " | " << number_text(percentile(x->latency_us, 0.5))
                       << " / " << number_text(percentile(x->latency_us, 0.99)) << " | ";
                    if (hot)
                        md << (x->successes ? format("%.2f", static_cast<double>(x->attempts) / static_cast<double>(x->successes))
                                            : "—")
                           << " | ";
                    md << (x->successes ? format("%.2f", static_cast<double>(x->statements) / static_cast<double>(x->successes))
                                        : "—")
                       << " | " << ratio_to(*x, raw_of(cells, *x)) << " | " << ratio_to(*x, native_of(cells, *x, b)) << " | "
                       << ratio_to(*x, redis_of(cells, *x)) << " |\n";
                }
        md << "\n</details>\n\n";
    }
    // Redis on its own.
    for (const auto& b : {std::string("redis"), std::string("redis-aof")}) {
        auto rows = rows_for(cells, b);
        if (rows.empty()) continue;
        md << "<details><summary>" << (b == "redis" ? "Redis" : "Redis (fsync always)") << ": every number</summary>\n\n"
           << "| workers | " << (hot ? "hold ms | " : "") << "ops/s median (min–max) | p50 / p99 µs | "
           << (hot ? "attempts per success | " : "") << "commands per op |\n|---:|" << (hot ? "---:|" : "")
           << "---:|---:|" << (hot ? "---:|" : "") << "---:|\n";
        for (const auto* x : rows) {
            md << "| " << x->workers << " | " << (hot ? std::to_string(x->hold_ms) + " | " : "")
               << spread_text(spread_of(x->rates)) << " | " << number_text(percentile(x->latency_us, 0.5)) << " / "
               << number_text(percentile(x->latency_us, 0.99)) << " | ";
            if (hot)
                md << (x->successes ? format("%.2f", static_cast<double>(x->attempts) / static_cast<double>(x->successes)) : "—")
                   << " | ";
            md << (x->successes ? format("%.2f", static_cast<double>(x->statements) / static_cast<double>(x->successes)) : "—")
               << " |\n";
        }
        md << "\n</details>\n\n";
    }
}

// One key, threads of one process waiting with lock(): one table, with the
// contender's single-worker cycle rate (the uncontended workload) beside it.
void waiters_section(std::ostringstream& md, const results& r) {
    md << r.settings.waiters << "\n\n"
       << "| database | contender | threads | acquisitions/s median (min–max) | wait p50 / p99 ms | statements per "
          "acquisition | 1 worker, lock + unlock/s | ÷ 1 worker | ÷ native |\n"
       << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& b : databases)
        for (const auto* x : rows_for(r.waiters, b)) {
            const thread_cell* single = nullptr;
            for (const auto& u : r.uncontended)
                if (u.workers == 1 && u.c.id == x->c.id) single = &u;
            const thread_cell* native = native_of(r.waiters, *x, b);
            md << "| " << backend_title(b) << " | " << x->c.label << " | " << x->workers << " | "
               << spread_text(spread_of(x->rates)) << " | " << number_text(percentile(x->latency_us, 0.5) / 1e3)
               << " / " << number_text(percentile(x->latency_us, 0.99) / 1e3) << " | "
               << (x->successes ? format("%.2f", static_cast<double>(x->statements) / static_cast<double>(x->successes))
                                : "—")
               << " | " << (single ? number_text(median(single->rates)) : "—") << " | "
               << (single ? ratio_text(median(x->rates), median(single->rates)) : "—") << " | "
               << (native && native != x ? ratio_text(median(x->rates), median(native->rates)) : "—") << " |\n";
        }
    md << "\nStatements are the library's (sqlock: the shared client's; native: each connection's); the waiting "
          "threads of a native lock block in the server and send nothing more.\n\n";
}

// A bar chart of one or two columns per label.
void bar_chart(std::ostringstream& gp_all, const std::filesystem::path& dir, const std::string& img_dir,
               const std::string& name, const std::string& title, const std::string& ylabel, bool log,
               const std::vector<std::string>& columns, const std::vector<std::pair<std::string, std::vector<double>>>& rows) {
    std::ostringstream tsv;
    tsv << "contender";
    for (const auto& c : columns) tsv << "\t" << c;
    tsv << "\n";
    for (const auto& [label, values] : rows) {
        tsv << label;
        for (double v : values) tsv << "\t" << format("%.4f", v);
        tsv << "\n";
    }
    write_file(dir / "data" / (name + ".tsv"), tsv.str());
    gp_all << "reset\nset terminal svg size 1000,520 dynamic noenhanced font 'sans,10'\n"
           << "set output \"" << img_dir << "/" << name << ".svg\"\n"
           << "set datafile separator '\\t'\nset style data histograms\nset style histogram clustered gap 1\n"
           << "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset grid ytics\nset key top left\n"
           << "set xtics rotate by -40 left noenhanced\nset bmargin 12\nset rmargin 12\n"
           << (log ? "set logscale y\n" : "set yrange [0:*]\n") << "set title \"" << title << "\"\nset ylabel \"" << ylabel
           << "\"\nplot ";
    for (std::size_t i = 0; i < columns.size(); ++i)
        gp_all << (i ? ", " : "") << "\"" << (dir / "data" / (name + ".tsv")).string() << "\" using " << i + 2
               << (i == 0 ? ":xtic(1)" : "") << " title columnheader(" << i + 2 << ")";
    gp_all << "\n";
}

std::vector<double> all_of(const std::vector<contention_summary>& runs, std::vector<double> contention_summary::*m) {
    std::vector<double> out;
    for (const auto& s : runs) out.insert(out.end(), (s.*m).begin(), (s.*m).end());
    return out;
}

void handoff_section(std::ostringstream& md, std::ostringstream& gp, const results& r, const std::filesystem::path& dir,
                     const std::string& img_dir, const std::string& img_link) {
    md << r.settings.handoff << "\n\n"
       << "| contender | handoffs measured | p50 ms | p99 ms | max ms | handoffs/s median (min–max) | statements per "
          "acquisition | p50 ÷ native (same database) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
    std::vector<std::pair<std::string, std::vector<double>>> chart;
    std::map<std::string, double> native_p50;
    for (const auto& x : r.handoff)
        if (x.c.kind == family::native) native_p50[x.c.backend] = percentile(all_of(x.runs, &contention_summary::handoff_ms), 0.5);
    for (const auto& x : r.handoff) {
        const auto h = all_of(x.runs, &contention_summary::handoff_ms);
        std::vector<double> rates, stmts;
        for (const auto& s : x.runs) {
            rates.push_back(static_cast<double>(s.handoffs) / r.handoff_seconds);
            stmts.push_back(s.statements_per_acquisition);
        }
        const double p50 = percentile(h, 0.5), p99 = percentile(h, 0.99);
        const double most = h.empty() ? 0 : *std::max_element(h.begin(), h.end());
        auto native = native_p50.find(x.c.backend);
        md << "| " << x.label() << " | " << h.size() << " | " << ms_text(p50) << " | " << ms_text(p99) << " | "
           << ms_text(most) << " | " << spread_text(spread_of(rates)) << " | " << number_text(median(stmts)) << " | "
           << (native == native_p50.end() ? "—" : ratio_text(p50, native->second)) << " |\n";
        chart.push_back({x.label(), {p50, p99}});
    }
    md << "\n";
    bar_chart(gp, dir, img_dir, "handoff", "Handoff latency: release → next holder's lock() returns", "ms", true,
              {"p50", "p99"}, chart);
    md << "![handoff latency](" << img_link << "/handoff.svg)\n\n";
}

void fairness_section(std::ostringstream& md, std::ostringstream& gp, const results& r,
                      const std::filesystem::path& dir, const std::string& img_dir, const std::string& img_link) {
    md << r.settings.fairness << "\n\n"
       << "| contender | acquisitions/s | Jain's index | acquisitions per process, min–max | longest wait s | wait p99 s "
          "| FIFO inversions (passed a caller waiting ≥ 10 ms longer) | handoff p50 / p99 ms | statements per acquisition | overlapping grants |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    std::vector<std::pair<std::string, std::vector<double>>> jain, waits;
    for (const auto& x : r.fairness) {
        if (x.runs.empty()) continue;
        const auto& s = x.runs.front();
        const auto [lo, hi] = std::minmax_element(s.per_process.begin(), s.per_process.end());
        md << "| " << x.label() << " | " << number_text(static_cast<double>(s.acquisitions) / r.fairness_seconds) << " | "
           << format("%.3f", s.jain) << " | " << *lo << "–" << *hi << " | " << (s.max_wait_unfinished ? "≥ " : "")
           << number_text(s.max_wait_ms / 1e3) << " | " << number_text(percentile(s.wait_ms, 0.99) / 1e3) << " | "
           << s.overtakes << " | " << ms_text(percentile(s.handoff_ms, 0.5)) << " / "
           << ms_text(percentile(s.handoff_ms, 0.99)) << " | " << number_text(s.statements_per_acquisition) << " | "
           << s.order_errors << " |\n";
        jain.push_back({x.label(), {s.jain}});
        waits.push_back({x.label(), {s.max_wait_ms / 1e3, percentile(s.wait_ms, 0.99) / 1e3}});
    }
    md << "\n";
    bar_chart(gp, dir, img_dir, "fairness-jain", "Fairness: Jain's index over the processes' acquisitions (1 = equal)",
              "Jain's index", false, {"Jain"}, jain);
    bar_chart(gp, dir, img_dir, "fairness-wait", "Fairness: longest and p99 wait for the key", "seconds", true,
              {"longest wait", "p99 wait"}, waits);
    md << "![Jain's index](" << img_link << "/fairness-jain.svg)\n\n![waits](" << img_link << "/fairness-wait.svg)\n\n";
}

void renewal_section(std::ostringstream& md, std::ostringstream& gp_all, const results& r,
                     const std::filesystem::path& dir, const std::string& img_dir, const std::string& img_link) {
    md << r.settings.renewal << "\n\n";
    std::vector<std::size_t> counts;
    for (const auto& x : r.renewal)
        if (std::find(counts.begin(), counts.end(), x.leases) == counts.end()) counts.push_back(x.leases);
    std::sort(counts.begin(), counts.end());
    auto med = [](const std::vector<renewal_window>& ws, const std::function<double(const renewal_window&)>& f) {
        std::vector<double> v;
        for (const auto& w : ws) v.push_back(f(w));
        return spread_of(v);
    };
    auto cpu_ms = [](const renewal_cell& x) {
        return [&x](const renewal_window& w) {
            return (x.in_process ? w.client_cpu : w.server_cpu.value_or(0)) * 1e3 / w.seconds;
        };
    };
    md << "| held leases | contender | statements/s | leases renewed/s | server CPU ms/s | ÷ sqlock (server CPU) "
          "| client CPU ms/s | worst lag ms | lost or failed |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (std::size_t n : counts) {
        std::map<std::string, double> sqlock_cpu;
        for (const auto& x : r.renewal)
            if (x.leases == n && x.c.kind == family::sqlock) sqlock_cpu[x.c.backend] = med(x.windows, cpu_ms(x)).med;
        for (const auto& x : r.renewal) {
            if (x.leases != n) continue;
            double lag = 0, troubles = 0;
            for (const auto& w : x.windows) {
                lag = std::max(lag, w.worst_lag);
                troubles += w.troubles;
            }
            const spread cpu = med(x.windows, cpu_ms(x));
            auto base = sqlock_cpu.find(x.c.backend);
            md << "| " << n << " | " << (x.c.kind == family::redis ? "" : backend_title(x.c.backend) + " ") << x.c.label
               << (x.c.kind == family::sqlock ? " (watchdog, batched)" : x.c.kind == family::native ? " (held by the session)" : " (per lease)")
               << " | " << spread_text(med(x.windows, [](const renewal_window& w) { return w.statements / w.seconds; }))
               << " | " << number_text(med(x.windows, [](const renewal_window& w) { return w.renewals / w.seconds; }).med)
               << " | " << spread_text(cpu) << (x.in_process ? " (in process)" : "") << " | "
               << (base == sqlock_cpu.end() || x.in_process ? "—" : ratio_text(cpu.med, base->second)) << " | "
               << number_text(med(x.windows, [](const renewal_window& w) { return w.client_cpu * 1e3 / w.seconds; }).med)
               << " | " << format("%.0f", lag * 1e3) << " | " << format("%.0f", troubles) << " |\n";
        }
    }
    md << "\n";
    // Chart: server CPU against held leases, one line per contender.
    std::vector<std::string> labels;
    for (const auto& x : r.renewal) {
        const std::string l = (x.c.kind == family::redis ? "" : backend_title(x.c.backend) + " ") + x.c.label;
        if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
    }
    for (const char* what : {"statements", "cpu"}) {
        std::ostringstream tsv;
        tsv << "leases";
        for (const auto& l : labels) tsv << "\t" << l;
        tsv << "\n";
        for (std::size_t n : counts) {
            tsv << n;
            for (const auto& l : labels) {
                double v = std::nan("");
                for (const auto& x : r.renewal)
                    if (x.leases == n && (x.c.kind == family::redis ? "" : backend_title(x.c.backend) + " ") + x.c.label == l)
                        v = std::string(what) == "cpu"
                                ? med(x.windows, cpu_ms(x)).med
                                : med(x.windows, [](const renewal_window& w) { return w.statements / w.seconds; }).med;
                tsv << "\t" << (std::isnan(v) || v <= 0 ? "NaN" : format("%.3f", v));
            }
            tsv << "\n";
        }
        const std::string name = std::string("renewal-") + what;
        write_file(dir / "data" / (name + ".tsv"), tsv.str());
        gp_all << "reset\nset terminal svg size 1000,480 dynamic noenhanced font 'sans,10'\n"
               << "set output \"" << img_dir << "/" << name << ".svg\"\n"
               << "set datafile separator '\\t'\nset logscale xy\nset grid\nset key outside right top noenhanced\n"
               << "set xlabel 'held leases'\nset xtics (";
        for (std::size_t i = 0; i < counts.size(); ++i) gp_all << (i ? ", " : "") << counts[i];
        gp_all << ")\nset title \"Keeping leases alive: "
               << (std::string(what) == "cpu" ? "database CPU (SQLite: the whole process)" : "statements per second")
               << "\"\nset ylabel \"" << (std::string(what) == "cpu" ? "CPU ms per second" : "statements/s") << "\"\n"
               << "plot for [i=2:" << labels.size() + 1 << "] \"" << (dir / "data" / (name + ".tsv")).string()
               << "\" using 1:i with linespoints lw 2 title columnheader(i)\n";
    }
    md << "![renewal CPU](" << img_link << "/renewal-cpu.svg)\n\n![renewal statements](" << img_link
       << "/renewal-statements.svg)\n\n";
}

void recovery_section(std::ostringstream& md, std::ostringstream& gp, const results& r,
                      const std::filesystem::path& dir, const std::string& img_dir, const std::string& img_link) {
    md << r.settings.recovery << "\n\n| contender | recovery ms, median (min–max) | ÷ native (same database) |\n|---|---:|---:|\n";
    std::map<std::string, double> native;
    for (const auto& x : r.recovery)
        if (x.c.kind == family::native) native[x.c.backend] = median(x.ms);
    std::vector<std::pair<std::string, std::vector<double>>> chart;
    for (const auto& x : r.recovery) {
        const std::string label = x.c.kind == family::redis ? x.c.label : backend_title(x.c.backend) + " " + x.c.label;
        auto base = native.find(x.c.backend);
        md << "| " << label << " | " << spread_text(spread_of(x.ms)) << " | "
           << (base == native.end() ? "—" : ratio_text(median(x.ms), base->second)) << " |\n";
        chart.push_back({label, {median(x.ms)}});
    }
    md << "\n";
    bar_chart(gp, dir, img_dir, "recovery", "Recovery: holder killed with SIGKILL → next holder's lock() returns", "ms",
              true, {"median"}, chart);
    md << "![recovery](" << img_link << "/recovery.svg)\n\n";
}

}  // namespace

void write_report(const results& r, const std::string& dir_name, const std::string& img_dir, const std::string& img_link) {
    const std::filesystem::path dir(dir_name);
    std::ostringstream md, gp;
    md << "### Machine, servers and run\n\n" << machine_table(r) << "\n";
    if (!r.uncontended.empty()) {
        md << "### Uncontended: distinct keys\n\n" << r.settings.run << "\n\n";
        thread_section(md, gp, r.uncontended, false, dir, img_dir, img_link);
    }
    if (!r.hot.empty()) {
        md << "### One hot key\n\n";
        thread_section(md, gp, r.hot, true, dir, img_dir, img_link);
    }
    if (!r.waiters.empty()) {
        md << "### One key, many waiting threads of one process\n\n";
        waiters_section(md, r);
    }
    if (!r.primitives.empty()) {
        md << "### Reader-writer locks, semaphores and multi-key locks\n\n" << r.settings.primitives << "\n\n";
        thread_section(md, gp, r.primitives, false, dir, img_dir, img_link, "primitives");
    }
    if (!r.handoff.empty()) {
        md << "### Handoff latency\n\n";
        handoff_section(md, gp, r, dir, img_dir, img_link);
    }
    if (!r.fairness.empty()) {
        md << "### Fairness\n\n";
        fairness_section(md, gp, r, dir, img_dir, img_link);
    }
    if (!r.renewal.empty()) {
        md << "### Keeping leases alive\n\n";
        renewal_section(md, gp, r, dir, img_dir, img_link);
    }
    if (!r.recovery.empty()) {
        md << "### Recovery after kill -9 of the holder\n\n";
        recovery_section(md, gp, r, dir, img_dir, img_link);
    }
    write_file(dir / "report.md", md.str());
    write_file(dir / "charts.gp", gp.str());
}

}  // namespace bench
