#include "pool/pool.hpp"

namespace sqlock::detail {

std::unique_ptr<session> session_pool::take(bool fresh, bool* reused) {
    if (!fresh) {
        std::lock_guard lock(mu_);
        if (!idle_.empty()) {
            auto s = std::move(idle_.back());
            idle_.pop_back();
            if (reused) *reused = true;
            return s;
        }
    }
    if (reused) *reused = false;
    return dialect_.connect();  // outside the mutex: connecting can take a while
}

void session_pool::put_back(std::unique_ptr<session> s) {
    std::unique_ptr<session> extra;  // closed outside the mutex
    std::lock_guard lock(mu_);
    if (idle_.size() < size_) idle_.push_back(std::move(s));
    else extra = std::move(s);
}

void session_pool::drop_idle() {
    std::vector<std::unique_ptr<session>> dead;
    {
        std::lock_guard lock(mu_);
        dead.swap(idle_);
    }
}  // closed outside the mutex

}  // namespace sqlock::detail
