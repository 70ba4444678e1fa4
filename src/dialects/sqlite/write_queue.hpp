#pragma once
// The in-process write turn of one SQLite database file, shared by every
// client of that file in this process.
//
// SQLite's busy handler sleeps and retries instead of queueing, so a thread
// writing in a tight loop would win the write lock nearly every time and
// starve the watchdog's renewals; writers of one process therefore take a
// turn here before they write. (Writers in other processes still meet the
// busy handler: see busy_wait in session.hpp.)
//
// Order: writers that had to wait are served first in, first out. But handing
// the turn to another thread costs a wake-up and a context switch, which with
// many writing threads was most of the cost of a write (32 threads did 0.68x
// the raw statements' rate when every turn went to the next in line). So
// the turn passes to the head of the queue at most every `patience`: in
// between, a writer that gives the turn back and asks again at once (a
// thread with several statements to run) keeps it. The head of the queue is
// woken at each give-back, so that it takes a turn nobody asks for at once,
// and it is handed the turn outright once `patience` has passed since the
// queue last got one. A queued writer therefore waits for the writers ahead
// of it and at most `patience` (plus the statement running) of others'.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace sqlock::detail {

class write_queue {
public:
    using clock = std::chrono::steady_clock;
    static constexpr clock::duration patience = std::chrono::milliseconds(1);

    void lock() {
        std::unique_lock l(mu_);
        if (!busy_ && (waiting_.empty() || clock::now() - served_ < patience)) {
            busy_ = true;
            return;
        }
        waiter me;
        waiting_.push_back(&me);
        for (;;) {
            me.cv.wait(l, [&] { return me.turn || me.woken; });
            if (me.turn) return;  // handed over by unlock(), which took us off the queue
            me.woken = false;
            awake_ = false;
            if (!busy_) {  // only the head is ever woken: we are it
                waiting_.pop_front();
                busy_ = true;
                served_ = clock::now();
                return;
            }
        }
    }

    void unlock() {
        std::lock_guard l(mu_);
        if (waiting_.empty()) {
            busy_ = false;
            return;
        }
        waiter* head = waiting_.front();
        if (clock::now() - served_ >= patience) {
            waiting_.pop_front();
            if (head->woken) awake_ = false;
            head->turn = true;  // busy_ stays set: nobody can take the turn on the way
            served_ = clock::now();
            head->cv.notify_one();  // under the mutex: `head` lives on its thread's stack until it sees its turn
            return;
        }
        busy_ = false;
        if (!awake_) {  // one woken head at a time; it looks once and sleeps again if passed
            awake_ = true;
            head->woken = true;
            head->cv.notify_one();
        }
    }

    // Writers queued now (for tests).
    std::size_t queued() {
        std::lock_guard l(mu_);
        return waiting_.size();
    }

private:
    struct waiter {
        std::condition_variable cv;
        bool turn = false;   // handed the turn
        bool woken = false;  // woken to look whether the turn is free
    };
    std::mutex mu_;
    bool busy_ = false;
    bool awake_ = false;      // the head is woken and has not looked yet
    clock::time_point served_;  // when a queued writer last got the turn
    std::deque<waiter*> waiting_;
};

}  // namespace sqlock::detail
