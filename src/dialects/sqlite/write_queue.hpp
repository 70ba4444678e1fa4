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
// thread with several statements to run) keeps it, and the head is not woken
// for it (waking it at every give-back only to find the turn taken again cost
// two context switches per write: 0.77x raw). The head instead sleeps until
// `patience` has passed since the queue last got a turn, then takes the turn
// if it is free, or is handed it at the next give-back. A queued writer
// therefore waits for the writers ahead of it and at most `patience` (plus
// the statement running) of others'; a turn nobody asks for stays unused for
// at most `patience`.
//
// Why 3 ms: a hand-over costs 32 threads about 0.15-0.3 ms of throughput,
// more than its parts measured alone explain (the queue with busy loops for
// statements loses 4%; switching between two connections costs 5 us a
// switch); the rest, presumably the next writer's thread and caches
// starting cold, was not pinned down. In interleaved runs on 2026-11-25 (two rounds
// of 3 repetitions), 32 threads did 0.75-0.95x the raw statements' rate
// with 1 ms, 0.83-0.88x with 2 ms and 0.86-0.96x with 3 ms. The price is the
// wait: with 32 threads writing without a pause, a lock + unlock's p99 went
// from 35-40 ms (1 ms) to 97-105 ms. The raw statements' p99 is lower only
// because SQLite's busy handler lets a few threads do nearly all the writes
// while the others sleep.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace sqlock::detail {

class write_queue {
public:
    using clock = std::chrono::steady_clock;
    static constexpr clock::duration patience = std::chrono::milliseconds(3);

    void lock() {
        std::unique_lock l(mu_);
        if (!busy_ && (waiting_.empty() || clock::now() - served_ < patience)) {
            busy_ = true;
            return;
        }
        waiter me;
        waiting_.push_back(&me);
        for (;;) {
            if (waiting_.front() == &me && clock::now() - served_ < patience) {
                // The head: look again once the others' patience is over.
                me.cv.wait_until(l, served_ + patience, [&] { return me.turn; });
            } else {
                // Not the head (woken when it becomes the head), or the head
                // once patience is over: the next give-back hands the turn.
                me.cv.wait(l, [&] { return me.turn || me.promoted; });
            }
            if (me.turn) return;  // handed over by unlock(), which took us off the queue
            me.promoted = false;
            if (waiting_.front() == &me && !busy_ && clock::now() - served_ >= patience) {
                take_head();
                return;
            }
        }
    }

    void unlock() {
        std::lock_guard l(mu_);
        busy_ = false;
        if (waiting_.empty() || clock::now() - served_ < patience) return;
        hand_to_head();
    }

    // The last writer will not write again soon (its thread is going to
    // sleep): the head of the queue gets the free turn now instead of
    // waiting out `patience` for a writer that is not coming back. Without
    // it, a release woke the next waiting thread of the process, which
    // queued behind the releaser's next ask and then sat out the rest of the
    // 3 ms: 16 threads of one process taking turns on one key did 364-398
    // acquisitions a second (523-551 while every waiting thread was woken
    // at each release), and 3,366-3,463 with this (durable file, 2 runs of
    // 2 repetitions, 2026-11-27).
    void pass_on() noexcept {
        std::lock_guard l(mu_);
        if (busy_ || waiting_.empty()) return;
        hand_to_head();
    }

    // Writers queued now (for tests).
    std::size_t queued() {
        std::lock_guard l(mu_);
        return waiting_.size();
    }

private:
    struct waiter {
        std::condition_variable cv;
        bool turn = false;      // handed the turn
        bool promoted = false;  // became the head of the queue
    };

    // The free turn goes to the queue's head, which is woken with it.
    void hand_to_head() {
        waiter* head = waiting_.front();
        take_head();            // busy_ set again: nobody can take the turn on the way
        head->turn = true;
        head->cv.notify_one();  // under the mutex: `head` lives on its thread's stack until it sees its turn
    }

    // The head of the queue gets the turn; the next one, now the head, is
    // woken to wait for its own turn with a deadline.
    void take_head() {
        waiting_.pop_front();
        busy_ = true;
        served_ = clock::now();
        if (!waiting_.empty()) {
            waiting_.front()->promoted = true;
            waiting_.front()->cv.notify_one();
        }
    }

    std::mutex mu_;
    bool busy_ = false;
    clock::time_point served_;  // when a queued writer last got the turn
    std::deque<waiter*> waiting_;
};

// The queue of one database file (its canonical path), shared by every
// client of the file in this process. A child of fork() starts with none of
// its parent's (src/dialects/common/per_process.hpp).
std::shared_ptr<write_queue> write_queue_of(const std::string& canonical_file);

}  // namespace sqlock::detail
