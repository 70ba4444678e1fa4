#include "queue/listener.hpp"

#include "queue/wakeups.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace sqlock::detail {

listener::listener(dialect& d, std::string channel, spdlog::logger& log, std::atomic<std::uint64_t>& received)
    : dialect_(d), channel_(std::move(channel)), log_(log), received_(received) {
    std::unique_ptr<notifier> first;
    try {
        first = dialect_.listen(channel_);
    } catch (const std::exception& e) {
        log_.warn("wake-up listener could not connect yet: {}", e.what());
    }
    thread_ = std::thread([this, n = std::move(first)]() mutable { main(std::move(n)); });
}

listener::~listener() {
    stop_ = true;
    thread_.join();  // it waits at most 250 ms at a time
}

void listener::main(std::unique_ptr<notifier> n) {
    while (!stop_.load()) {
        try {
            if (!n) {
                n = dialect_.listen(channel_);
                wakeups::notify_all(dialect_.tables());  // wake-ups may have been missed while it was down
            }
            switch (n->wait(std::chrono::milliseconds(250))) {
            case heard::ring: ++received_; [[fallthrough]];
            case heard::hint: wakeups::notify_heads(dialect_.tables()); break;
            case heard::nothing: break;
            }
        } catch (const std::exception& e) {
            n.reset();
            log_.warn("wake-up listener lost its connection, reconnecting: {}", e.what());
            for (int i = 0; i < 5 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

}  // namespace sqlock::detail
