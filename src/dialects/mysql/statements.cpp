#include "dialects/mysql/statements.hpp"

namespace sqlock::detail {

void bind_one(sql::PreparedStatement& ps, unsigned i, std::string_view v) { ps.setString(i, std::string(v)); }
void bind_one(sql::PreparedStatement& ps, unsigned i, std::int64_t v) { ps.setInt64(i, v); }
void bind_one(sql::PreparedStatement& ps, unsigned i, int v) { ps.setInt(i, v); }
void bind_one(sql::PreparedStatement& ps, unsigned i, bool v) { ps.setBoolean(i, v); }

void drain(sql::PreparedStatement& ps) {
    while (ps.getMoreResults()) std::unique_ptr<sql::ResultSet> more(ps.getResultSet());
}

std::string my_row::text(int i) const {
    const auto c = static_cast<unsigned>(i + 1);
    return rs.isNull(c) ? std::string() : std::string(rs.getString(c));
}

std::int64_t my_row::integer(int i) const {
    const auto c = static_cast<unsigned>(i + 1);
    return rs.isNull(c) ? 0 : static_cast<std::int64_t>(rs.getInt64(c));
}

sql::PreparedStatement& statement_cache::prepared(const std::string& name) {
    auto it = prepared_.find(name);
    if (it == prepared_.end())
        it = prepared_.emplace(name, std::unique_ptr<sql::PreparedStatement>(conn_.prepareStatement(sql_.get(name))))
                 .first;
    return *it->second;
}

sql::PreparedStatement& statement_cache::generated(const std::string& name, std::size_t n,
                                                   std::initializer_list<repeat> markers) {
    const std::string cache_key = name + "#" + std::to_string(n);
    auto it = prepared_.find(cache_key);
    if (it != prepared_.end()) return *it->second;
    // Steady state needs two sizes per statement (full batches and the
    // remainder); forget the rest so server-side statements stay few.
    if (++generated_count_ > 16) {
        for (auto g = prepared_.begin(); g != prepared_.end();)
            g = g->first.find('#') != std::string::npos ? prepared_.erase(g) : std::next(g);
        generated_count_ = 1;
    }
    std::string text = sql_.get(name);
    for (const auto& m : markers) {
        std::string expanded = m.group;
        for (std::size_t i = 1; i < n; ++i) expanded += std::string(m.separator) + m.group;
        text.replace(text.rfind(m.marker), std::string_view(m.marker).size(), expanded);
    }
    it = prepared_.emplace(cache_key, std::unique_ptr<sql::PreparedStatement>(conn_.prepareStatement(text))).first;
    return *it->second;
}

}  // namespace sqlock::detail
