#pragma once
// The command line checked but not run: for tests/fuzz/cli_fuzz.cpp.

namespace sqlock::cli {

// Parses and checks argv as `sqlock` does, then stops before it would open a
// database or start PROGRAM. Returns 0 for a command line sqlock would go on
// to run (or after printing --help or --version), exit_status::usage for one
// it refuses; anything it throws is a bug.
int check_arguments(int argc, char** argv);

}  // namespace sqlock::cli
