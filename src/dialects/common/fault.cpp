#include "dialects/common/fault.hpp"

#include <atomic>
#include <memory>
#include <mutex>

namespace sqlock::detail {
namespace {

std::atomic<bool> installed{false};
std::mutex mu;
std::shared_ptr<const fault_hook> current;

std::atomic<bool> client_clock{false};

}  // namespace

void use_client_clock_for_testing() { client_clock.store(true); }
bool using_client_clock_for_testing() { return client_clock.load(std::memory_order_relaxed); }

void set_fault_hook_for_testing(fault_hook hook) {
    std::lock_guard lock(mu);
    current = hook ? std::make_shared<const fault_hook>(std::move(hook)) : nullptr;
    installed.store(current != nullptr);
}

void fault(fault_point p) {
    if (!installed.load(std::memory_order_relaxed)) return;
    std::shared_ptr<const fault_hook> hook;
    {
        std::lock_guard lock(mu);
        hook = current;
    }
    if (hook) (*hook)(p);
}

}  // namespace sqlock::detail
