#pragma once
// A child process with a skewed wall clock: libfaketime preloaded directly.
//
// Not the faketime(1) wrapper: libfaketime 0.9.10 names a semaphore and a
// shared-memory object in /dev/shm after the pid of the process that creates
// them, and removes them at exit. A process killed with SIGKILL leaves them
// behind, and a later process that draws the same pid (common in the small
// pid namespaces CI runs in) finds the name taken. The wrapper then gives up
// ("only works on platforms that support the sem_open() system call"), which
// failed a CI run; the preloaded library carries on without them.

#include <fcntl.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace test::faketime {

// Environment entries that preload libfaketime for the wall clock only: the
// kernel never steps CLOCK_MONOTONIC, and a faked one would break every timed
// wait in the child. Add FAKETIME or FAKETIME_TIMESTAMP_FILE to say how.
inline std::vector<std::string> preload() {
    return {std::string("LD_PRELOAD=") + SQLOCK_FAKETIME_LIB, "FAKETIME_DONT_FAKE_MONOTONIC=1"};
}

// Entries that run a child OFFSET ("+1h", "-1h") off the wall clock.
inline std::vector<std::string> env(const std::string& offset) {
    auto e = preload();
    e.push_back("FAKETIME=" + offset);
    return e;
}

// Removes what libfaketime named after PID, for a child that was killed
// before its exit handler could; call once the child is reaped.
inline void forget(pid_t pid) {
    const std::string n = std::to_string(pid);
    ::sem_unlink(("/faketime_sem_" + n).c_str());
    ::shm_unlink(("/faketime_shm_" + n).c_str());
}

}  // namespace test::faketime
