#include "core/grant.hpp"

#include <sqlock/errors.hpp>

#include <pthread.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>

namespace sqlock::detail {

namespace {

// Bumped in the child of a fork(): what a thread cached before it (random
// bytes the parent may still hand out, the parent's pid and thread id) must
// not be used there. Without the handler nothing is cached. A child made
// without fork handlers (_Fork(), a raw clone()) that goes on to lock would
// reuse up to 15 of its parent's coming ids: not supported.
std::atomic<std::uint64_t> forks{0};
const bool fork_aware = ::pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1); }) == 0;

// Whether what a thread cached when forks was `made` is still this
// process's own. (forks changes only in a child, at the fork, before any of
// its code runs.)
bool still_ours(std::uint64_t made) {
    return fork_aware && made == forks.load();
}

void fill_random(unsigned char* out, std::size_t size) {
    std::size_t got = 0;
    while (got < size) {
        ssize_t n = getrandom(out + got, size - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw error("getrandom() failed: cannot make a random owner id");
        }
        got += static_cast<std::size_t>(n);
    }
}

}  // namespace

std::string new_owner_id() {
    // 128 random bits per id, drawn 16 ids at a time: one getrandom() per
    // acquisition was a system call in every lock, which on SQLite (a lock
    // and unlock in about 25 us) showed in the rate.
    constexpr std::size_t id_bytes = 16, batch = 16;
    struct pool {
        unsigned char bytes[id_bytes * batch];
        std::size_t used = sizeof bytes;
        std::uint64_t generation = 0;
    };
    thread_local pool p;
    if (p.used == sizeof p.bytes || !still_ours(p.generation)) {
        fill_random(p.bytes, sizeof p.bytes);
        p.used = 0;
        p.generation = forks.load();
    }
    const unsigned char* bytes = p.bytes + p.used;
    p.used += id_bytes;
    static constexpr char hex[] = "0123456789abcdef";
    std::string id(2 * id_bytes, '0');
    for (std::size_t i = 0; i < id_bytes; ++i) {
        id[2 * i] = hex[bytes[i] >> 4];
        id[2 * i + 1] = hex[bytes[i] & 15];
    }
    return id;
}

std::uint64_t thread_serial() noexcept {
    static std::atomic<std::uint64_t> next{1};
    thread_local const std::uint64_t mine = next.fetch_add(1, std::memory_order_relaxed);
    return mine;
}

std::string holder_description() {
    // Three system calls (host name, pid, thread id), made once per thread
    // and again after a fork; a host renamed while the process runs keeps
    // its old name here.
    struct cache {
        std::string text;
        std::uint64_t generation = 0;
    };
    thread_local cache c;
    if (!c.text.empty() && still_ours(c.generation)) return c.text;
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    c.text = std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid));
    c.generation = forks.load();
    return c.text;
}

}  // namespace sqlock::detail
