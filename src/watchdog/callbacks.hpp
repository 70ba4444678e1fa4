#pragma once
// The user's on_lost / on_renewed callbacks run here: one thread per client,
// one callback at a time, in the order they were posted, so that a slow or
// blocking callback never holds up a renewal or a loss signal. A client with
// an event listener (client_options::on_event) has a second one for events,
// so that a slow listener does not hold up on_lost either. RAII: the
// constructor starts the thread, the destructor stops and joins it
// (callbacks still pending are dropped).

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>

namespace sqlock::detail {

class callback_queue {
public:
    callback_queue();
    // Joins the thread, or detaches it when a callback dropped the last
    // reference to the client (so destruction runs on the thread itself).
    ~callback_queue();
    // What the destructor does, earlier: after it returns (on another
    // thread), no posted callback runs any more.
    void stop();
    // Whether the caller runs on the queue's thread (inside a callback).
    bool on_thread() const { return thread_.get_id() == std::this_thread::get_id(); }
    callback_queue(const callback_queue&) = delete;
    callback_queue& operator=(const callback_queue&) = delete;

    // Runs fn on the thread. fn must not throw.
    void post(std::function<void()> fn);
    // post(fn) unless `limit` callbacks are already waiting; then false, and
    // fn is dropped.
    bool try_post(std::function<void()> fn, std::size_t limit);

private:
    struct state;
    std::shared_ptr<state> state_;
    std::thread thread_;
};

}  // namespace sqlock::detail
