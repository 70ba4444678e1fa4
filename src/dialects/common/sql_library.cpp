#include "dialects/common/sql_library.hpp"

#include <algorithm>
#include <stdexcept>

namespace sqlock::detail {

std::string apply_prefix(std::string_view sql, std::string_view prefix) {
    static constexpr std::string_view from = "sqlock_";
    std::string out;
    out.reserve(sql.size());
    std::size_t pos = 0;
    for (auto hit = sql.find(from); hit != std::string_view::npos; hit = sql.find(from, pos)) {
        out.append(sql.substr(pos, hit - pos));
        out.append(prefix);
        pos = hit + from.size();
    }
    out.append(sql.substr(pos));
    return out;
}

sql_library::sql_library(std::string_view dialect, std::string_view prefix) : prefix_(prefix) {
    const std::string sql_dir = "sql/" + std::string(dialect) + "/";
    const std::string mig_dir = "migrations/" + std::string(dialect) + "/";
    for (std::size_t i = 0; i < embedded_file_count; ++i) {
        std::string_view path = embedded_files[i].path;
        std::string text = apply_prefix(embedded_files[i].text, prefix);
        if (path.starts_with(sql_dir)) {
            auto name = path.substr(sql_dir.size());
            name.remove_suffix(4);  // ".sql"
            statements_.emplace_back(std::string(name), std::move(text));
        } else if (path.starts_with(mig_dir)) {
            // NNNN_name.sql
            auto file = path.substr(mig_dir.size());
            int version = std::stoi(std::string(file.substr(0, 4)));
            std::string name(file.substr(5, file.size() - 5 - 4));
            migrations_.push_back({version, std::move(name), std::move(text)});
        }
    }
    // Includes are expanded from the raw texts, one level deep: a fragment
    // holds no markers of its own.
    std::vector<std::pair<std::string, std::string>> expanded;
    expanded.reserve(statements_.size());
    for (const auto& statement : statements_) {
        // Not a structured binding: clang before 16 cannot capture one in a lambda.
        const std::string& name = statement.first;
        auto fragment = [&](std::string_view include) -> std::string_view {
            for (const auto& [n, t] : statements_)
                if (n == include) return t;
            throw std::logic_error("sqlock: sql/" + std::string(dialect) + "/" + name + ".sql includes a missing {{" +
                                   std::string(include) + "}}");
        };
        expanded.emplace_back(name, expand_includes(statement.second, fragment));
    }
    statements_ = std::move(expanded);
    std::sort(migrations_.begin(), migrations_.end(),
              [](const migration& a, const migration& b) { return a.version < b.version; });
}

const std::string& sql_library::get(std::string_view name) const {
    for (const auto& [n, text] : statements_)
        if (n == name) return text;
    throw std::logic_error("sqlock: no embedded statement " + std::string(name));
}

std::string expand_includes(std::string_view sql,
                            const std::function<std::string_view(std::string_view)>& fragment) {
    std::string out;
    std::size_t pos = 0;
    for (auto open = sql.find("{{"); open != std::string_view::npos; open = sql.find("{{", pos)) {
        auto close = sql.find("}}", open);
        if (close == std::string_view::npos) throw std::logic_error("sqlock: unterminated {{ in embedded SQL");
        out.append(sql.substr(pos, open - pos));
        std::string_view body = fragment(sql.substr(open + 2, close - open - 2));
        std::string code;
        while (!body.empty()) {
            auto eol = body.find('\n');
            std::string_view line = body.substr(0, eol);
            body.remove_prefix(eol == std::string_view::npos ? body.size() : eol + 1);
            std::string_view lead = line.substr(std::min(line.find_first_not_of(" \t"), line.size()));
            if (lead.starts_with("--")) continue;
            code.append(line).push_back('\n');
        }
        while (!code.empty() && (code.back() == '\n' || code.back() == ' ')) code.pop_back();
        out.append(code);
        pos = close + 2;
    }
    out.append(sql.substr(pos));
    return out;
}

std::vector<std::string> split_statements(std::string_view sql) {
    std::vector<std::string> out;
    std::string current;
    std::string delimiter = ";";
    bool has_code = false;
    std::size_t pos = 0;
    while (pos < sql.size()) {
        auto eol = sql.find('\n', pos);
        std::string_view line = sql.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
        pos = eol == std::string_view::npos ? sql.size() : eol + 1;
        std::string_view trimmed = line;
        while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\r' || trimmed.back() == '\t'))
            trimmed.remove_suffix(1);
        std::string_view lead = trimmed;
        while (!lead.empty() && (lead.front() == ' ' || lead.front() == '\t')) lead.remove_prefix(1);
        if (lead.starts_with("--") || lead.empty()) continue;
        // The mysql client's DELIMITER command, so that a stored function's
        // body (full of semicolons) stays one statement in a file that the
        // mysql client can also apply.
        if (!has_code && (lead.starts_with("DELIMITER ") || lead.starts_with("delimiter "))) {
            delimiter = std::string(lead.substr(10));
            while (!delimiter.empty() && delimiter.front() == ' ') delimiter.erase(0, 1);
            if (delimiter.empty()) throw std::invalid_argument("sqlock: DELIMITER without a delimiter");
            continue;
        }
        has_code = true;
        if (trimmed.ends_with(delimiter)) {
            if (delimiter != ";") line = trimmed.substr(0, trimmed.size() - delimiter.size());
            current.append(line).push_back('\n');
            out.push_back(current);
            current.clear();
            has_code = false;
        } else {
            current.append(line).push_back('\n');
        }
    }
    if (has_code) out.push_back(current);
    return out;
}

}  // namespace sqlock::detail
