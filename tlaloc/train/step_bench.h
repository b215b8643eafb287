// The three-lane step benchmark of the seed case study (`tlaloc bench step`):
//   (a) host lane, optimizer in the program (Trainer, Lane::host);
//   (b) pjrt lane, the gradient program on the device, gradients (and the loss) downloaded and
//       AdamW applied on the host (optim::reference_step), parameters uploaded every step;
//   (c) pjrt lane, optimizer in the program, state resident and donated (Trainer, Lane::pjrt).
// Each lane starts from the same initial parameters; the losses of its first kLossSteps steps
// are recorded (during warm-up, untimed) so the lanes can be compared. Lane (c) has two modes:
//   latency: `steps` steps timed one by one, each waited for (dispatch to results ready);
//   throughput: `repeats` runs of `steps` steps dispatched back to back, all in flight, one wait
//   at the end; a run's time / steps is its time per step (as a training loop runs, and as JAX
//   times with one block_until_ready after N steps).
// Lanes (a) and (b) are synchronous (a step is done when it returns; (b) downloads every
// step's gradients): their per-step times are both their latency and their throughput.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

inline constexpr int kLossSteps = 10;
inline constexpr int64_t kThroughputRepeats = 5;

// Which of lane (c)'s modes run (`--mode latency|throughput|both`).
enum class StepBenchMode { latency, throughput, both };
// "latency", "throughput" or "both"; tlaloc::Error naming the value otherwise.
StepBenchMode parse_step_bench_mode(const std::string& s);

struct StepBenchCase {
  std::string title;
  std::function<std::shared_ptr<nn::Module>()> make_model;  // same initial values every call
  LossFn loss;
  std::vector<DataInput> data;
  Batch resident;                          // the resident inputs' values, by name
  std::function<Batch(int64_t)> per_step;  // the per-step inputs of step s (null: none)
  optim::Optimizer opt;
  int num_threads = 0;             // host lane threads
  DType precision = DType::f32;    // TrainerOptions::precision (lane (b): f32 or bf16)
  std::optional<bool> flat_state;  // TrainerOptions::flat_state (lanes (a) and (c))
};

struct LaneTiming {
  std::string name;            // "(a) host lane, optimizer in the program"
  std::string skipped;         // not empty: why the lane did not run
  std::vector<double> ms;      // latency: each timed step, milliseconds, sorted (empty: not run)
  std::vector<double> losses;  // the first kLossSteps steps' losses
  std::string detail;          // pjrt lanes: per step uploads / dispatch / waits / downloads
  // Lane (c)'s throughput: each run's time / throughput_steps, sorted (empty: not run).
  std::vector<double> throughput_ms;
  int64_t throughput_steps = 0;
  std::string throughput_detail;  // per run: waits, dispatch, uploads
  // The client's waits on executions (Client::call_times().waits) while the latency steps and
  // the throughput runs were timed.
  int64_t latency_waits = 0, throughput_waits = 0;
  double median() const { return ms.empty() ? 0 : ms[ms.size() / 2]; }
  double throughput_median() const {
    return throughput_ms.empty() ? 0 : throughput_ms[throughput_ms.size() / 2];
  }
};

// Lane (a). `warmup` is raised to kLossSteps if smaller.
LaneTiming bench_host_lane(const StepBenchCase& c, int64_t steps, int64_t warmup);
// Lane (b) on `client`.
LaneTiming bench_pjrt_host_optimizer(const StepBenchCase& c, runtime::pjrt::Client& client,
                                     int64_t steps, int64_t warmup);
// Lane (c) on `client`, in `mode` (throughput: `repeats` runs of `steps` steps).
LaneTiming bench_pjrt_in_program(const StepBenchCase& c, runtime::pjrt::Client& client,
                                 int64_t steps, int64_t warmup,
                                 StepBenchMode mode = StepBenchMode::both,
                                 int64_t repeats = kThroughputRepeats);
// A skipped lane (reason given).
LaneTiming skipped_lane(char lane, std::string reason);

// The table: median / min / max per lane and lane (c)'s throughput row, ratios (b)/(c) and
// (a)/(c), the largest relative difference of each lane's losses from lane (a)'s over
// kLossSteps steps, and a last line that scripts/device-check.sh reads:
//   RESULT tlaloc lane_a_median_ms=.. lane_b_median_ms=.. lane_c_median_ms=..
//     lane_c_latency_{median,min,max}_ms=.. lane_c_throughput_{median,min,max}_ms=..
//     lane_c_throughput_steps=N lane_c_throughput_repeats=R
// (skipped lanes and modes not run left out; lane_c_median_ms is the latency median).
std::string lane_table(const std::vector<LaneTiming>& lanes);

}  // namespace tlaloc::train
