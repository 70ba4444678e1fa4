#include "watchdog/callbacks.hpp"

#include "watchdog/threads.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace sqlock::detail {

struct callback_queue::state {
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    std::deque<std::function<void()>> pending;

    void main() {
        for (;;) {
            std::function<void()> fn;
            {
                std::unique_lock lock(mu);
                cv.wait(lock, [&] { return stopping || !pending.empty(); });
                if (stopping) return;
                fn = std::move(pending.front());
                pending.pop_front();
            }
            fn();
            fn = nullptr;  // may destroy the client here; it then asks us to stop
        }
    }
};

callback_queue::callback_queue() : state_(std::make_shared<state>()) {
    thread_ = std::thread([s = state_] { s->main(); });
}

callback_queue::~callback_queue() { stop(); }

void callback_queue::stop() { stop_thread(state_->mu, state_->stopping, state_->cv, thread_); }

void callback_queue::post(std::function<void()> fn) {
    {
        std::lock_guard lock(state_->mu);
        state_->pending.push_back(std::move(fn));
    }
    state_->cv.notify_one();
}

bool callback_queue::try_post(std::function<void()> fn, std::size_t limit) {
    {
        std::lock_guard lock(state_->mu);
        if (state_->pending.size() >= limit) return false;
        state_->pending.push_back(std::move(fn));
    }
    state_->cv.notify_one();
    return true;
}

}  // namespace sqlock::detail
