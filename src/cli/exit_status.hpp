#pragma once
// The exit statuses `sqlock` produces itself (PROGRAM's own status passes
// through unchanged). sysexits.h numbers where one fits; 126, 127 and 128+N
// as a shell reports them.

namespace sqlock::cli::exit_status {

inline constexpr int failure = 1;           // EXIT_FAILURE: an outcome sqlock has no other status for
inline constexpr int usage = 64;            // EX_USAGE: bad options, keys, durations or URLs
inline constexpr int unavailable = 69;      // EX_UNAVAILABLE: the database is unreachable or has no schema
inline constexpr int lease_lost = 70;       // the lease was lost while PROGRAM ran (or before it started)
inline constexpr int os_error = 71;         // EX_OSERR: fork, pipe, poll or another system call failed
inline constexpr int io_error = 74;         // EX_IOERR: sqlock's own output could not be written
inline constexpr int busy = 75;             // EX_TEMPFAIL: key busy, run done or not due (--conflict-exit-code)
inline constexpr int cannot_execute = 126;  // PROGRAM was found but cannot be executed
inline constexpr int not_found = 127;       // PROGRAM was not found
inline constexpr int signal_base = 128;     // + N: ended (or interrupted) by signal N

}  // namespace sqlock::cli::exit_status
