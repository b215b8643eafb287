// The steps a Trainer has dispatched and not yet waited for. On the pjrt lane a step returns
// as soon as the device has queued it (asynchronous dispatch, as JAX's); the queue keeps each
// step's completion event, lets at most `max_in_flight` be pending, and turns a device failure
// into one error naming the step. The host lane's steps are done when they return: their events
// are empty and never queued.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "tlaloc/runtime/executable.h"

namespace tlaloc::train {

class StepQueue {
 public:
  // `max_in_flight` >= 0 (0: every step is waited for as it is dispatched); tlaloc::Error
  // otherwise.
  explicit StepQueue(int max_in_flight);
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;
  // Waits for what is still in flight, ignoring failures (nothing reads it any more).
  ~StepQueue();

  // Before dispatching a step: throws the recorded failure if a step failed, then waits for the
  // oldest steps until one more may be queued.
  void make_room();
  // After dispatching step `step` (1-based, Trainer::steps_taken() after it) whose outputs
  // complete with `done`: queues it (nothing when done is empty), and waits for it at once when
  // max_in_flight is 0.
  void push(int64_t step, runtime::Event done);
  // Waits for every queued step: for the newest only when it succeeded (each step reads the one
  // before's outputs, so all older ones did too), else oldest first. Throws tlaloc::Error
  // "Trainer: step N failed on the device: <the lane's message>; ..." for the first that failed;
  // from then on this and make_room() throw that same error (the state the step produced is
  // lost, never read).
  void wait_all();
  size_t size() const { return pending_.size(); }
  int max_in_flight() const { return max_; }
  bool failed() const { return !failure_.empty(); }

 private:
  struct Pending {
    int64_t step;
    runtime::Event done;
  };
  void wait_oldest();

  int max_;
  std::deque<Pending> pending_;
  std::string failure_;  // the error once a step failed ("" = none)
};

}  // namespace tlaloc::train
