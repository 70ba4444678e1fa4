#pragma once
// Process-wide state that a child of fork() must not inherit.
//
// The parent's queues of waiting threads and of SQLite writers may be held,
// at the moment of the fork, by parent threads the child does not have: a
// client the child opens would then wait on them for ever (a write turn
// never given back). So a child starts with a fresh object, made in the
// fork's child handler, when only the forking thread exists; the parent's
// stays behind, unreachable and never destroyed, as the parent's own is
// never destroyed either (clients may outlive static destruction). A child
// can use only clients it opens itself: those of its parent have lost their
// threads (watchdog, listener) in the fork.

#include <pthread.h>

#include <atomic>

namespace sqlock::detail {

template <class T>
T& per_process() {
    static std::atomic<T*> current{nullptr};
    static const bool made = [] {
        current.store(new T);
        ::pthread_atfork(nullptr, nullptr, [] { current.store(new T); });
        return true;
    }();
    (void)made;
    return *current.load();
}

}  // namespace sqlock::detail
