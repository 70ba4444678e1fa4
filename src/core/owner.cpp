#include "core/grant.hpp"

#include <sqlock/errors.hpp>

#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>

namespace sqlock::detail {

std::string new_owner_id() {
    unsigned char bytes[16];
    std::size_t got = 0;
    while (got < sizeof bytes) {
        ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw error("getrandom() failed: cannot make a random owner id");
        }
        got += static_cast<std::size_t>(n);
    }
    static constexpr char hex[] = "0123456789abcdef";
    std::string id(32, '0');
    for (std::size_t i = 0; i < sizeof bytes; ++i) {
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
    char host[HOST_NAME_MAX + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(host) + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid));
}

}  // namespace sqlock::detail
