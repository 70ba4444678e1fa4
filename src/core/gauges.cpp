// client::gauges(): the whole-database figures `sqlock status --metrics`
// exports. Apart from client.cpp's administration operations because it is
// one statement per dialect (sql/<dialect>/gauges.sql) and nothing else.

#include "core/client_impl.hpp"

#include <sqlock/client.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace sqlock {

database_gauges client::gauges(std::size_t queue_limit) {
    impl_->check_schema();
    // SQL limits are signed 64-bit.
    queue_limit = std::min<std::size_t>(queue_limit, std::numeric_limits<std::int64_t>::max());
    return impl_->with_session([&](detail::session& s) { return s.gauges(queue_limit); });
}

}  // namespace sqlock
