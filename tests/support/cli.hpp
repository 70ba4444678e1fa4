#pragma once
// Running the built `sqlock` program from the CLI suites (cli_run_test.cpp,
// cli_status_test.cpp, cli_config_test.cpp): as a child process with a
// backend's database in its environment, and CLI_TEST, which makes one plain
// test function a test case per backend.

#include "support/backends.hpp"
#include "support/doctest_types.hpp"
#include "support/helpers.hpp"
#include "support/process.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace test {

struct cli_result {
    int status = -1;  // exit status, or 128 + signal
    std::string out, err;
    // stderr holds exactly one line, starting "sqlock: ".
    bool one_line_message() const {
        return err.starts_with("sqlock: ") && err.find('\n') == err.size() - 1;
    }
};

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs `sqlock args...` with the backend's database in its environment.
class cli {
public:
    explicit cli(const test::backend_base& db)
        : env_{"SQLOCK_URL=" + db.url(), "SQLOCK_TABLE_PREFIX=" + db.prefix} {}

    cli_result operator()(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) const {
        const auto out = dir_.path / "out", err = dir_.path / "err";
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // none of the test's own connections
        auto env_strings = environment(extra_env);
        std::vector<std::string> argv_strings{SQLOCK_CLI};
        argv_strings.insert(argv_strings.end(), args.begin(), args.end());
        auto argv = pointers(argv_strings);
        auto envp = pointers(env_strings);
        pid_t pid;
        REQUIRE(posix_spawn(&pid, SQLOCK_CLI, &actions, nullptr, argv.data(), envp.data()) == 0);
        posix_spawn_file_actions_destroy(&actions);
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out), slurp(err)};
    }

    // `sqlock args...` in the background, its stdout readable line by line.
    test::child start(const std::vector<std::string>& args) const {
        std::vector<std::string> argv{SQLOCK_CLI};
        argv.insert(argv.end(), args.begin(), args.end());
        return test::child(argv, env_);
    }
    // `sh -c SCRIPT` with $0 the sqlock program, in the background.
    test::child start_shell(const std::string& script) const {
        return test::child({"sh", "-c", script, SQLOCK_CLI}, env_);
    }

private:
    std::vector<std::string> environment(const std::vector<std::string>& extra) const {
        std::vector<std::string> out;
        auto all = env_;
        all.insert(all.end(), extra.begin(), extra.end());
        for (char** e = environ; *e; ++e) {
            const std::string entry(*e);
            bool replaced = false;
            for (const auto& mine : all) replaced |= entry.substr(0, entry.find('=')) == mine.substr(0, mine.find('='));
            if (!replaced) out.push_back(entry);
        }
        out.insert(out.end(), all.begin(), all.end());
        return out;
    }
    static std::vector<char*> pointers(std::vector<std::string>& v) {
        std::vector<char*> out;
        for (auto& s : v) out.push_back(s.data());
        out.push_back(nullptr);
        return out;
    }

    std::vector<std::string> env_;
    test::temp_dir dir_;
};

// A holder in the background: `sqlock run ... KEY -- sh -c SCRIPT`. SCRIPT
// prints "held" first, or where `held` is given (after its traps are set).
inline test::child hold(const cli& run, std::vector<std::string> options, const std::string& key, const std::string& script) {
    std::vector<std::string> args{"run"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {key, "--", "sh", "-c", script.find("echo held") == std::string::npos ? "echo held; " + script : script});
    auto c = run.start(args);
    const auto line = c.read_line(std::chrono::seconds(15));
    REQUIRE(line);
    CHECK(*line == "held");
    return c;
}

inline std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

}  // namespace test

// Each test is a plain function, compiled once; CLI_TEST makes it a test
// case per backend (template bodies tripled this file's build time).
#define CLI_TEST(title, test)                          \
    TEST_CASE_TEMPLATE(title, Db, ALL_BACKENDS) {      \
        Db db;                                         \
        test(db);                                      \
    }
