// Fuzzes the `sqlock` command line's argument handling (src/cli/main.cpp,
// through sqlock::cli::check_arguments: CLI11's parsing and every check a
// command makes before it connects — durations, modes, keys, job names —
// without opening a database or starting a program).
//
// The input is argv after "sqlock", its arguments separated by NUL bytes.
// Checked: the command line is either accepted (0) or refused as a usage
// error (exit status 64, sqlock's one documented status for bad usage);
// any exception, any other status, and any sanitizer report is a crash.

#include "cli/check_arguments.hpp"
#include "cli/exit_status.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::vector<std::string>& args, const std::string& what) {
    std::fprintf(stderr, "cli_fuzz: %s\n  argv:", what.c_str());
    for (const auto& a : args) std::fprintf(stderr, " '%s'", a.c_str());
    std::fprintf(stderr, "\n");
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // The command line alone decides: no defaults from the environment.
    for (const char* name : {"SQLOCK_URL", "SQLOCK_TABLE_PREFIX", "SQLOCK_DURABILITY"}) ::unsetenv(name);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> args{"sqlock"};
    std::string current;
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            args.push_back(current);
            current.clear();
        } else {
            current += static_cast<char>(data[i]);
        }
    }
    if (size > 0) args.push_back(current);
    if (args.size() > 64) return -1;  // not worth keeping in the corpus

    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int status;
    try {
        status = sqlock::cli::check_arguments(static_cast<int>(args.size()), argv.data());
    } catch (const std::exception& e) {
        fail(args, std::string("check_arguments threw: ") + e.what());
    } catch (...) {
        fail(args, "check_arguments threw something that is not a std::exception");
    }
    if (status != 0 && status != sqlock::cli::exit_status::usage)
        fail(args, "exit status " + std::to_string(status) + " is not 0 or 64 (usage)");
    return 0;
}
