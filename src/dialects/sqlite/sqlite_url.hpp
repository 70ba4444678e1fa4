#pragma once
// sqlite: URLs: the file's path.

#include <string>
#include <string_view>

namespace sqlock::detail {

// sqlite:path, sqlite:/abs/path, sqlite:///abs/path (sqlite://rel/path).
// Throws config_error for parameters, an empty path or an in-memory database.
std::string parse_sqlite_path(std::string_view url);

}  // namespace sqlock::detail
