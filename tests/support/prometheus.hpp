#pragma once
// A strict reader of the Prometheus text format, for the CLI suite's checks
// of `sqlock status --metrics` (cli_status_test.cpp, which also tests it).

#include "support/cli.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace test {

// The Prometheus text exposition format 0.0.4, read strictly
// (https://prometheus.io/docs/instrumenting/exposition_formats/): every line,
// each ending in a line feed, is "# HELP name text", "# TYPE name
// counter|gauge|histogram" or a sample "name{label="value",...} value"; names
// and label names are valid; a family has one TYPE, before its samples, and
// its lines are not interleaved with another family's; HELP and label values
// use only the escapes the format defines; no series appears twice. Throws
// std::runtime_error naming the line that breaks a rule.
struct prometheus {
    struct sample {
        std::string name;
        std::map<std::string, std::string> labels;
        double value = 0;
    };
    std::map<std::string, std::string> type, help;
    std::vector<sample> samples;

    // The samples of `name` whose labels include `with`.
    std::vector<sample> find(const std::string& name, const std::map<std::string, std::string>& with = {}) const {
        std::vector<sample> out;
        for (const auto& s : samples)
            if (s.name == name && std::all_of(with.begin(), with.end(), [&](const auto& l) {
                    const auto it = s.labels.find(l.first);
                    return it != s.labels.end() && it->second == l.second;
                }))
                out.push_back(s);
        return out;
    }
    // The value of the one sample of `name` with `with` among its labels.
    double value(const std::string& name, const std::map<std::string, std::string>& with = {}) const {
        const auto found = find(name, with);
        if (found.size() != 1)
            throw std::runtime_error(std::to_string(found.size()) + " samples of " + name + " match, not 1");
        return found.front().value;
    }
    double sum(const std::string& name) const {
        double total = 0;
        for (const auto& s : find(name)) total += s.value;
        return total;
    }

    static prometheus parse(const std::string& text) {
        prometheus doc;
        if (!text.empty() && text.back() != '\n') throw std::runtime_error("the last line has no line feed");
        std::set<std::string> finished;       // families whose lines have ended
        std::string current;                  // the family of the previous line
        std::set<std::string> series;         // name{labels} seen
        int number = 0;
        for (const auto& line : lines(text)) {
            ++number;
            auto fail = [&](const std::string& why) {
                throw std::runtime_error("line " + std::to_string(number) + " [" + line + "]: " + why);
            };
            // Every line belongs to a family; a family's lines come together.
            auto enter = [&](const std::string& family) {
                if (family == current) return;
                if (finished.count(family)) fail("the lines of " + family + " are not together");
                if (!current.empty()) finished.insert(current);
                current = family;
            };
            if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
                const bool is_help = line[2] == 'H';
                const auto rest = line.substr(7);
                const auto space = rest.find(' ');
                if (space == std::string::npos) fail("no text after the name");
                const auto name = rest.substr(0, space), what = rest.substr(space + 1);
                if (!metric_name(name)) fail("invalid metric name");
                enter(name);
                if (is_help) {
                    if (doc.help.count(name)) fail("a second HELP");
                    doc.help[name] = unescape(what, false, fail);
                } else {
                    if (doc.type.count(name)) fail("a second TYPE");
                    if (what != "counter" && what != "gauge" && what != "histogram") fail("unknown type " + what);
                    if (!doc.find(name).empty()) fail("TYPE after samples");
                    doc.type[name] = what;
                }
                continue;
            }
            if (line.empty() || line[0] == '#' || line[0] == ' ') fail("neither HELP, TYPE nor a sample");
            sample s;
            std::size_t at = 0;
            while (at < line.size() && line[at] != '{' && line[at] != ' ') ++at;
            s.name = line.substr(0, at);
            if (!metric_name(s.name)) fail("invalid metric name");
            std::string family = s.name;
            if (!doc.type.count(family)) {
                for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                    const std::string base = s.name.substr(0, s.name.size() - std::strlen(suffix));
                    if (s.name.ends_with(suffix) && doc.type.count(base) && doc.type[base] == "histogram") family = base;
                }
            }
            if (!doc.type.count(family)) fail("a sample before its family's TYPE");
            enter(family);
            std::string labels_text;
            if (at < line.size() && line[at] == '{') {
                const auto open = at++;
                for (;;) {
                    std::size_t name_end = at;
                    while (name_end < line.size() && line[name_end] != '=') ++name_end;
                    const auto label = line.substr(at, name_end - at);
                    if (!label_name(label)) fail("invalid label name [" + label + "]");
                    if (name_end + 1 >= line.size() || line[name_end + 1] != '"') fail("label value not quoted");
                    std::size_t v = name_end + 2;
                    std::string raw;
                    while (v < line.size() && line[v] != '"') {
                        if (line[v] == '\\' && v + 1 < line.size()) raw += line[v++];
                        raw += line[v++];
                    }
                    if (v >= line.size()) fail("unterminated label value");
                    if (s.labels.count(label)) fail("label " + label + " twice");
                    s.labels[label] = unescape(raw, true, fail);
                    at = v + 1;
                    if (at < line.size() && line[at] == ',') {
                        ++at;
                        continue;
                    }
                    if (at < line.size() && line[at] == '}') break;
                    fail("expected , or } after a label");
                }
                labels_text = line.substr(open, at + 1 - open);
                ++at;
            }
            if (at >= line.size() || line[at] != ' ') fail("no single space before the value");
            const auto value = line.substr(at + 1);
            if (value.empty() || value.find_first_of(" \tx") != std::string::npos) fail("a value, and only a value");
            if (value == "+Inf" || value == "-Inf" || value == "NaN") {
                s.value = value == "NaN" ? NAN : value == "+Inf" ? INFINITY : -INFINITY;
            } else {
                char* end = nullptr;
                s.value = std::strtod(value.c_str(), &end);
                if (end != value.c_str() + value.size() || std::isinf(s.value) || std::isnan(s.value))
                    fail("not a number");
            }
            if (!series.insert(s.name + labels_text).second) fail("the same series twice");
            doc.samples.push_back(std::move(s));
        }
        return doc;
    }

private:
    static bool metric_name(const std::string& n) {
        if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
        return std::all_of(n.begin(), n.end(),
                           [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; });
    }
    static bool label_name(const std::string& n) {
        if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])) || n.starts_with("__")) return false;
        return std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    }
    // HELP text: \\ and \n; label values also \".
    template <class Fail>
    static std::string unescape(const std::string& text, bool label, Fail&& fail) {
        std::string out;
        for (std::size_t i = 0; i < text.size(); ++i) {
            if (text[i] != '\\') {
                if (label && text[i] == '"') fail("an unescaped quote");
                out += text[i];
                continue;
            }
            const char next = i + 1 < text.size() ? text[++i] : '\0';
            if (next == '\\') out += '\\';
            else if (next == 'n') out += '\n';
            else if (next == '"' && label) out += '"';
            else fail(std::string("an escape the format does not define: \\") + next);
        }
        return out;
    }
};

}  // namespace test
