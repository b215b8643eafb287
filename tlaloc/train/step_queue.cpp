#include "tlaloc/train/step_queue.h"

#include <algorithm>

namespace tlaloc::train {

StepQueue::StepQueue(int max_in_flight) : max_(max_in_flight) {
  if (max_in_flight < 0)
    fail("Trainer: max_in_flight {} must be >= 0 (0: wait for every step)", max_in_flight);
}

StepQueue::~StepQueue() {
  for (const Pending& p : pending_) {
    try {
      p.done.wait();
    } catch (const Error&) {
    }
  }
}

void StepQueue::wait_oldest() {
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  try {
    p.done.wait();
  } catch (const Error& e) {
    // The later steps read this one's outputs: they are lost with it, not waited for.
    pending_.clear();
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');  // one line
    failure_ = fmt::format(
        "Trainer: step {} failed on the device: {} (the parameters and optimizer state after "
        "step {} are lost: start again from a checkpoint)",
        p.step, why, p.step - 1);
    fail("{}", failure_);
  }
}

void StepQueue::make_room() {
  if (failed()) fail("{}", failure_);
  while (!pending_.empty() && pending_.size() >= size_t(std::max(max_, 1))) wait_oldest();
}

void StepQueue::push(int64_t step, runtime::Event done) {
  if (done.empty()) return;
  pending_.push_back({step, std::move(done)});
  if (max_ == 0) wait_all();
}

void StepQueue::wait_all() {
  if (failed()) fail("{}", failure_);
  if (pending_.empty()) return;
  // Each step reads the one before's outputs (the donated state), so the device completes them
  // in order and a failed step fails every later one (PJRT propagates an input's error to the
  // outputs and completion event). The newest done without error thus means all are: one wait
  // (JAX's block_until_ready on the last output). After a failure the older ones are waited
  // for, oldest first, to name the step that failed.
  try {
    pending_.back().done.wait();
    pending_.clear();
    return;
  } catch (const Error&) {
  }
  while (!pending_.empty()) wait_oldest();
}

}  // namespace tlaloc::train
