// sqlock_campaign_check: judges campaign cells.
//
//   sqlock_campaign_check CELL_DIR...
//       One JSON verdict per cell on stdout (also written to CELL_DIR/check.json).
//       Exits 1 when a cell has a violation of (a)-(d) or (f)-(h), 2 when a cell
//       cannot be read.
//   sqlock_campaign_check --expect LETTERS CELL_DIR...
//       For negative controls: exits 0 when every check named (e.g. "agh")
//       has violations in every cell ("": when every cell has some), 1 when
//       one has none (said on stderr).
//   sqlock_campaign_check report --out FILE [--seconds N] [--machine TEXT] [--command TEXT] CELL_DIR...
//       The markdown report of judged cells, written between the campaign
//       markers of FILE (the rest of FILE is left as it is), or as all of
//       FILE when it has none.

#include "campaign/checker.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using nlohmann::json;

namespace {

const std::string begin_marker = "<!-- campaign:begin (scripts/faults.sh writes from here to campaign:end) -->";
const std::string end_marker = "<!-- campaign:end -->";

std::string join(const json& list, const char* sep) {
    std::string out;
    for (const auto& item : list) out += (out.empty() ? "" : sep) + item.get<std::string>();
    return out;
}

int v(const json& verdict, const char* check) { return verdict[check]["violations"].get<int>(); }

std::string cell_row(const json& r) {
    const auto& m = r["meta"];
    const auto& c = r["counts"];
    const auto& e = r["e_liveness"];
    const auto& x = r["c_lost_before_next_grant"]["excused"];
    int excused = 0;
    for (const auto& [k, n] : x.items()) excused += n.get<int>();
    std::ostringstream row;
    row << "| " << m["backend"].get<std::string>() << " | " << m["mode"].get<std::string>() << " | "
        << join(m["faults"], ", ") << " | " << c["trials"] << " | " << c["grants"] << " | " << c["fenced_writes"]
        << " (" << c["writes_rejected"] << " fenced off) | " << c["lost_reports"] << " | " << v(r, "a_fenced_writes")
        << " | " << v(r, "b_tokens") << " | " << v(r, "c_lost_before_next_grant") << " (" << excused << " excused) | "
        << v(r, "d_jobs") << " (" << c["job_runs_succeeded"] << " runs, " << r["d_jobs"]["retried"] << " retried) | "
        << v(r, "f_orphans") << " | " << e["samples"] << ": " << e["p50_ms"] << " / " << e["p90_ms"] << " / "
        << e["max_ms"] << " (" << e["over_bound"] << ") | ";
    // Cells judged before (g) and (h) existed have neither.
    if (r.contains("g_semaphore")) {
        const auto& g = r["g_semaphore"];
        const auto& h = r["h_reader_writer"];
        row << v(r, "g_semaphore") << " (" << g["permits"] << " permits, max " << g["max_live"] << "/" << g["n"]
            << ") | " << v(r, "h_reader_writer") << " (" << h["exclusive_holders"] << " X, " << h["shared_holders"]
            << " S, " << h["shared_overlaps"] << " S&S) |\n";
    } else {
        row << "- | - |\n";
    }
    return row.str();
}

int report(int argc, char** argv) {
    std::string out, machine, command;
    long seconds = 0;
    std::vector<std::string> dirs;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--out" || a == "--machine" || a == "--command" || a == "--seconds") && i + 1 < argc) {
            const std::string value = argv[++i];
            if (a == "--out") out = value;
            else if (a == "--machine") machine = value;
            else if (a == "--command") command = value;
            else seconds = std::stol(value);
        } else {
            dirs.push_back(a);
        }
    }
    if (out.empty() || dirs.empty()) {
        std::cerr << "usage: sqlock_campaign_check report --out FILE [--seconds N] [--machine TEXT] "
                     "[--command TEXT] CELL_DIR...\n";
        return 64;
    }
    std::vector<json> cells, controls;
    for (const auto& d : dirs) {
        std::ifstream in(d + "/check.json");
        auto j = json::parse(in, nullptr, false);
        if (j.is_discarded()) {
            std::cerr << "sqlock_campaign_check: " << d << "/check.json is missing: judge the cell first\n";
            return 2;
        }
        (j["meta"].value("control", "none") == "none" ? cells : controls).push_back(std::move(j));
    }
    long trials = 0, grants = 0, writes = 0, violations = 0;
    for (const auto& c : cells) {
        trials += c["counts"]["trials"].get<long>();
        grants += c["counts"]["grants"].get<long>();
        writes += c["counts"]["fenced_writes"].get<long>();
        violations += c["violations"].get<long>();
    }
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::ostringstream md;
    md << begin_marker << "\n\n## Results of the last run\n\n";
    md << "`" << command << "` on " << date << " (" << machine << "): " << cells.size() << " cells, " << trials
       << " trials, " << grants << " grants, " << writes << " fenced writes, **" << violations
       << " violations** of (a)-(d) and (f)-(h); " << seconds / 3600 << " h " << seconds % 3600 / 60
       << " min in all.\n\n";
    md << "Columns: trials of the fault; grants of the hot keys; fenced writes committed (and how many "
          "the fence turned away: writes by holders whose lease was gone); lost reports (`on_lost`); "
          "violations of each check (for (c): handoffs where the old holder could not report, counted "
          "apart); (d): job runs succeeded and runs retried after their holder was killed mid-run; (e): "
          "samples, then p50 / p90 / max ms from a key becoming free after the fault healed to its next "
          "grant, and (in parentheses) samples above lease + 1 s; (g): permits that acted, and the most that "
          "acted together / N; (h): exclusive and shared holders that acted, and pairs of readers whose acts "
          "overlapped.\n\n";
    const char* const header =
        " | trials | grants | fenced writes | lost | (a) | (b) | (c) | (d) jobs | (f) | (e) liveness | (g) permits | "
        "(h) readers-writers |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    md << "| backend | mode | fault" << header;
    for (const auto& c : cells) md << cell_row(c);
    if (!controls.empty()) {
        md << "\n### Negative controls\n\nThe same workload with a hole made on purpose; each must show "
              "violations, or the zeros above prove nothing.\n\n";
        md << "| backend | hole | fault" << header;
        for (auto c : controls) {
            c["meta"]["mode"] = c["meta"]["control"];
            md << cell_row(c);
        }
        md << "\nThe first violation of each check a control broke:\n\n";
        for (const auto& c : controls)
            for (const char* check : {"a_fenced_writes", "b_tokens", "c_lost_before_next_grant", "d_jobs", "f_orphans",
                                      "g_semaphore", "h_reader_writer"})
                if (c.contains(check) && v(c, check) > 0)
                    md << "- " << c["meta"]["backend"].get<std::string>() << ", "
                       << c["meta"]["control"].get<std::string>() << ": (" << check[0] << ") "
                       << c[check]["details"][0].dump() << "\n";
    }
    md << "\n" << end_marker << "\n";

    std::string text;
    {
        std::ifstream in(out);
        std::stringstream all;
        all << in.rdbuf();
        text = all.str();
    }
    const auto b = text.find(begin_marker.substr(0, 20));
    const auto e = text.find(end_marker);
    if (b != std::string::npos && e != std::string::npos && e > b)
        text = text.substr(0, b) + md.str() + text.substr(text.find('\n', e) + 1);
    else
        text = "# Fault campaign results\n\n" + md.str();
    std::ofstream(out) << text;
    return 0;
}

// The verdict's name of the check with this letter, or "".
std::string check_named(char letter) {
    for (const char* name : {"a_fenced_writes", "b_tokens", "c_lost_before_next_grant", "d_jobs", "f_orphans",
                             "g_semaphore", "h_reader_writer"})
        if (name[0] == letter) return name;
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "report") return report(argc, argv);
    std::string expect;
    bool expecting = false;
    int first = 1;
    if (argc >= 3 && std::string(argv[1]) == "--expect") {
        expecting = true;
        expect = argv[2];
        first = 3;
        for (char letter : expect)
            if (check_named(letter).empty()) {
                std::cerr << "sqlock_campaign_check: --expect takes letters of checks: a b c d f g h\n";
                return 64;
            }
    }
    if (argc <= first) {
        std::cerr << "usage: sqlock_campaign_check [--expect LETTERS] CELL_DIR... | "
                     "report --out FILE ... CELL_DIR...\n";
        return 64;
    }
    int rc = 0;
    for (int i = first; i < argc; ++i) {
        try {
            const auto verdict = campaign::check(campaign::load_cell(argv[i]));
            std::ofstream(std::string(argv[i]) + "/check.json") << verdict.dump(1) << "\n";
            std::cout << verdict.dump() << "\n";
            const bool some = verdict["violations"].get<int>() > 0;
            if (expecting ? expect.empty() && !some : some) rc = std::max(rc, 1);
            for (char letter : expect)
                if (v(verdict, check_named(letter).c_str()) == 0) {
                    std::cerr << "sqlock_campaign_check: " << argv[i] << ": no violation of (" << letter << ")\n";
                    rc = std::max(rc, 1);
                }
        } catch (const std::exception& e) {
            std::cerr << "sqlock_campaign_check: " << argv[i] << ": " << e.what() << "\n";
            rc = 2;
        }
    }
    return rc;
}
