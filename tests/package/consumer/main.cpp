// Uses an installed sqlock (see ../run.cmake).
//   consumer <db-path>                           SQLite round trip; prints token=N, exits 0
//   consumer --expect-config-error <url> <opt>   exits 0 only if opening <url> (or the first
//                                                operation) throws sqlock::config_error whose
//                                                what() names <opt>

#include <sqlock/sqlock.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

namespace {

int fail(const std::string& why) {
    std::cout << std::flush;
    std::cerr << "consumer: FAIL: " << why << std::endl;
    return 1;
}

int round_trip(const std::string& db_path) {
    const std::string url = "sqlite:" + db_path;
    const std::string key = "package-test";

    auto first = sqlock::client::open(url);
    first.migrate();
    if (first.schema_version() != first.required_schema_version()) {
        return fail("schema_version() " + std::to_string(first.schema_version()) + " after migrate(), expected " +
                    std::to_string(first.required_schema_version()));
    }
    std::cout << "dialect=" << first.dialect() << '\n';

    auto held = first.try_acquire(key);
    if (!held) return fail("first try_acquire() on a fresh database returned empty");
    const std::int64_t token = held->token();
    std::cout << "token=" << token << '\n';
    if (token <= 0) return fail("token " + std::to_string(token) + " is not positive");

    auto second = sqlock::client::open(url);
    if (auto stolen = second.try_acquire(key)) {
        return fail("a second client took a held key (token " + std::to_string(stolen->token()) + ")");
    }
    std::cout << "second client: held elsewhere\n";

    held->release();
    auto next = second.try_acquire(key);
    if (!next) return fail("the second client could not take the key after release()");
    if (next->token() <= token) {
        return fail("token did not grow: " + std::to_string(next->token()) + " after " + std::to_string(token));
    }
    std::cout << "after release: token=" << next->token() << '\n';
    next->release();
    std::cout << "OK\n";
    return 0;
}

int expect_config_error(const std::string& url, const std::string& option) {
    try {
        auto c = sqlock::client::open(url);  // may connect lazily,
        c.migrate();                         // so the first operation counts too
    } catch (const sqlock::config_error& e) {
        std::cout << "config_error: " << e.what() << '\n';
        if (std::string_view(e.what()).find(option) == std::string_view::npos) {
            return fail("the config_error for " + url + " does not name " + option);
        }
        std::cout << "OK\n";
        return 0;
    } catch (const std::exception& e) {
        return fail("expected sqlock::config_error naming " + option + " for " + url +
                    ", got another exception: " + e.what());
    }
    return fail("opening " + url + " and migrate() succeeded, expected sqlock::config_error naming " + option);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 4 && std::string_view(argv[1]) == "--expect-config-error") {
            return expect_config_error(argv[2], argv[3]);
        }
        if (argc == 2 && std::string_view(argv[1]).substr(0, 2) != "--") {
            return round_trip(argv[1]);
        }
        std::cerr << "usage: consumer <db-path>\n"
                     "       consumer --expect-config-error <url> <cmake-option>\n";
        return 2;
    } catch (const std::exception& e) {
        return fail(std::string("unexpected exception: ") + e.what());
    }
}
