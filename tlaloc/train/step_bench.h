// The three-lane step benchmark of the seed case study (`tlaloc bench step`):
//   (a) host lane, optimizer in the program (Trainer, Lane::host);
//   (b) pjrt lane, the gradient program on the device, gradients (and the loss) downloaded and
//       AdamW applied on the host (optim::reference_step), parameters uploaded every step;
//   (c) pjrt lane, optimizer in the program, state resident and donated (Trainer, Lane::pjrt).
// Each lane starts from the same initial parameters; the losses of its first kLossSteps steps
// are recorded (during warm-up, untimed) so the lanes can be compared; then `steps` steps are
// timed one by one (every pjrt step is waited for: step() itself only dispatches it). Lane (c)
// then runs `steps` more as a training loop does, dispatched ahead and waited for at the end,
// and reports their mean time in its detail line.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

inline constexpr int kLossSteps = 10;

struct StepBenchCase {
  std::string title;
  std::function<std::shared_ptr<nn::Module>()> make_model;  // same initial values every call
  LossFn loss;
  std::vector<DataInput> data;
  Batch resident;                          // the resident inputs' values, by name
  std::function<Batch(int64_t)> per_step;  // the per-step inputs of step s (null: none)
  optim::Optimizer opt;
  int num_threads = 0;           // host lane threads
  DType precision = DType::f32;  // TrainerOptions::precision (lane (b): f32 or bf16)
};

struct LaneTiming {
  std::string name;            // "(a) host lane, optimizer in the program"
  std::string skipped;         // not empty: why the lane did not run
  std::vector<double> ms;      // timed steps, milliseconds, sorted
  std::vector<double> losses;  // the first kLossSteps steps' losses
  std::string detail;          // pjrt lanes: per step uploads / dispatch / waits / downloads
  double median() const { return ms.empty() ? 0 : ms[ms.size() / 2]; }
};

// Lane (a). `warmup` is raised to kLossSteps if smaller.
LaneTiming bench_host_lane(const StepBenchCase& c, int64_t steps, int64_t warmup);
// Lane (b) on `client`.
LaneTiming bench_pjrt_host_optimizer(const StepBenchCase& c, runtime::pjrt::Client& client,
                                     int64_t steps, int64_t warmup);
// Lane (c) on `client`.
LaneTiming bench_pjrt_in_program(const StepBenchCase& c, runtime::pjrt::Client& client,
                                 int64_t steps, int64_t warmup);
// A skipped lane (reason given).
LaneTiming skipped_lane(char lane, std::string reason);

// The table: median / min / max per lane, ratios (b)/(c) and (a)/(c), the largest relative
// difference of each lane's losses from lane (a)'s over kLossSteps steps, and a last line
//   RESULT tlaloc lane_a_median_ms=.. lane_b_median_ms=.. lane_c_median_ms=..
// (skipped lanes left out) that scripts/device-check.sh reads.
std::string lane_table(const std::vector<LaneTiming>& lanes);

}  // namespace tlaloc::train
