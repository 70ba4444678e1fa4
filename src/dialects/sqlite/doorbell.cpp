#include "dialects/sqlite/doorbell.hpp"

#include <sqlock/errors.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace sqlock::detail {
namespace {

// The abstract address (a leading NUL, no file) of a channel's socket, and
// its length. Channels are sqlock's own names: a prefix and hex digits.
socklen_t address_of(std::string_view channel, sockaddr_un& addr) {
    static constexpr std::string_view tag = "sqlock-doorbell:";
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    const std::size_t room = sizeof addr.sun_path - 1 - tag.size();
    if (channel.size() > room) channel = channel.substr(0, room);
    std::memcpy(addr.sun_path + 1, tag.data(), tag.size());
    std::memcpy(addr.sun_path + 1 + tag.size(), channel.data(), channel.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + tag.size() + channel.size());
}

}  // namespace

sqlite_doorbell::sqlite_doorbell(const std::string& channel) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) throw connection_error(std::string("cannot make the SQLite wake-up socket: ") + std::strerror(errno));
    sockaddr_un addr;
    const socklen_t len = address_of(channel, addr);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
        const int err = errno;
        ::close(fd_);
        throw connection_error("cannot bind the SQLite wake-up socket for '" + channel + "': " + std::strerror(err));
    }
}

sqlite_doorbell::~sqlite_doorbell() { ::close(fd_); }

heard sqlite_doorbell::wait(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n < 0 && errno != EINTR) throw connection_error(std::string("SQLite wake-up socket: ") + std::strerror(errno));
    bool rang = false;
    char byte;
    while (::recv(fd_, &byte, 1, MSG_DONTWAIT) >= 0) rang = true;
    return rang ? heard::ring : heard::nothing;
}

void ring_sqlite_doorbell(std::string_view channel) noexcept {
    // One sending socket per thread: a release must not pay for a socket().
    thread_local struct sender {
        int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ~sender() {
            if (fd >= 0) ::close(fd);
            fd = -1;  // a ring from a later thread_local destructor sends nothing, not to a reused descriptor
        }
    } out;
    if (out.fd < 0 || channel.empty()) return;
    sockaddr_un addr;
    const socklen_t len = address_of(channel, addr);
    const char byte = 1;
    (void)::sendto(out.fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr), len);
}

}  // namespace sqlock::detail
