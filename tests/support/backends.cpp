#include "support/backends.hpp"
#include "support/helpers.hpp"


#include <cstdlib>
#include <fstream>
#include <sstream>
#include <mutex>

namespace test {

std::string random_hex(std::size_t n) {
    static std::mutex mu;
    static std::mt19937_64 rng(std::random_device{}());
    std::lock_guard lock(mu);
    static constexpr char hex[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += hex[rng() % 16];
    return s;
}

std::string env_or_throw(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v)
        throw std::runtime_error(std::string(name) +
                                 " is not set: run the suite through scripts/test.sh, which starts the servers");
    return v;
}

sqlock::client backend_base::open() const { return sqlock::client::open(url(), options()); }

sqlock::client backend_base::open_quiet() const {
    auto o = options();
    o.sweep = false;
    return sqlock::client::open(url(), o);
}

void backend_base::migrate() const { open().migrate(); }

sqlite_db::sqlite_db() {
    dir = std::filesystem::temp_directory_path() / ("sqlock-test-" + random_hex(12));
    std::filesystem::create_directories(dir);
    file = dir / "locks.db";
    migrate();
}

sqlite_db::~sqlite_db() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

postgres_db::postgres_db() : url_(env_or_throw("SQLOCK_TEST_POSTGRES_URL")) { migrate(); }

mysql_db::mysql_db() : url_(env_or_throw("SQLOCK_TEST_MYSQL_URL")) { migrate(); }

std::unique_ptr<raw_connection> sqlite_db::raw() const { return raw_connection_for(url()); }
std::unique_ptr<raw_connection> postgres_db::raw() const { return raw_connection_for(url_); }
std::unique_ptr<raw_connection> mysql_db::raw() const { return raw_connection_for(url_); }

void servers(const std::string& words) {
    const std::string script = env_or_throw("SQLOCK_TEST_SERVERS_SCRIPT");
    const std::string dir = env_or_throw("SQLOCK_TEST_SERVER_DIR");
    std::string cmd = "bash '" + script + "' " + words + " '" + dir + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("test-servers.sh " + words + " failed");
}

counter_history read_counter_history(const std::string& file) {
    counter_history h;
    {
        std::ifstream in(file);
        in >> h.count;
    }
    std::ifstream in(file + ".tokens");
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::int64_t token = 0;
        std::string owner;
        fields >> token >> owner;
        h.tokens.push_back(token);
        h.owners.insert(owner);
    }
    return h;
}

}  // namespace test
