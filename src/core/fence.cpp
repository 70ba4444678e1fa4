// The verdict of a fence, shared by the dialects that check it in C++ (the
// others raise the same reasons from their SQL function).

#include "core/client_impl.hpp"
#include "dialects/dialect.hpp"

#include <sqlock/errors.hpp>

namespace sqlock::detail {

std::string fence_reason(std::string_view key, std::int64_t token, std::optional<std::int64_t> current,
                         std::optional<std::int64_t> lease_token, bool live) {
    const std::string lease = "the lease on '" + std::string(key) + "' with token " + std::to_string(token);
    if (!current) return "the lease on '" + std::string(key) + "' is not held: the key was never granted";
    if (*current != token)
        return lease + " is not held: the key was granted again (token " + std::to_string(*current) + ")";
    if (lease_token != token || !live) return lease + " is not held: it expired or was released";
    return "";
}

const client_impl& lease_access::client(const lease& l) { return *l.grant_->client; }

}  // namespace sqlock::detail
