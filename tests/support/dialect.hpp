#pragma once
// The backend's dialect on a migrated schema, for tests that drive sessions
// and listeners directly, deciding when each one runs.

#include "support/backends.hpp"

#include "core/url.hpp"
#include "dialects/dialect.hpp"

#include <memory>

namespace test {

// The dialect keeps a reference to its context, so the two live and die
// together, in place.
class migrated_dialect {
public:
    explicit migrated_dialect(const backend_base& db) {
        db.migrate();
        ctx_.url = ctx_.redacted_url = db.url();
        ctx_.options = db.options();
        dialect_ = sqlock::detail::make_dialect(sqlock::detail::parse_url(ctx_.url).scheme, ctx_);
    }
    migrated_dialect(const migrated_dialect&) = delete;
    migrated_dialect& operator=(const migrated_dialect&) = delete;
    sqlock::detail::dialect* operator->() const { return dialect_.get(); }

private:
    sqlock::detail::dialect_context ctx_;
    std::unique_ptr<sqlock::detail::dialect> dialect_;
};

}  // namespace test
