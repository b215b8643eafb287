// Learning-rate schedules: a factor of each group's base lr at a 0-based step, lr(step) =
// base_lr · factor(step), computed on the host into the train step's lr inputs or, by the
// Trainer, inside the step from its index (factor_in_program), so one compiled executable
// serves the whole run.
//
//   constant       1; with warmup_steps > 0, linear warm-up first: (step + 1) / warmup_steps
//   cosine         min_factor + (1 − min_factor) · (1 + cos(π · min(step, T) / T)) / 2, T = total
//                  (torch.optim.lr_scheduler.CosineAnnealingLR's closed form, eta_min = min·lr)
//   warmup-cosine  linear warm-up for warmup_steps, then cosine over the remaining steps
//   step           gamma^floor(step / step_size) (torch.optim.lr_scheduler.StepLR)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {

enum class ScheduleKind { constant, cosine, warmup_cosine, step };

struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  int64_t total_steps = 1;   // cosine's horizon T (steps); >= 1
  int64_t warmup_steps = 0;  // linear warm-up (constant, warmup-cosine)
  double min_factor = 0;     // cosine floor, as a fraction of the base lr
  int64_t step_size = 1;     // step decay period (steps)
  double gamma = 0.1;        // step decay factor

  // Factor of the base lr at 0-based `step` (>= 0). Throws tlaloc::Error on a negative step or
  // inconsistent settings (see check()).
  double factor(int64_t step) const;
  // factor() inside a program (optax's way: the schedule as a function of the step count): an
  // f64 scalar of `step`, an s32 scalar in [0, 2^31). The same operations in the same order as
  // factor() (its cosine is the cosine op), so the host lane gives factor()'s bits. Throws as
  // check().
  trace::Tensor factor_in_program(const trace::Tensor& step) const;
  double lr(int64_t step, double base_lr) const { return base_lr * factor(step); }
  // total_steps >= 1, 0 <= warmup_steps (< total_steps for warmup-cosine), step_size >= 1,
  // 0 <= min_factor <= 1, gamma > 0.
  void check() const;
};

// "constant", "cosine", "warmup-cosine", "step".
std::string_view name(ScheduleKind k);
// The lr curve in words, only the fields its kind reads: "constant", "constant, 5 warm-up
// steps", "cosine over 2000 steps", "cosine over 2000 steps to 0.1 of the lr",
// "warmup-cosine over 2000 steps, 100 warm-up", "step: x0.1 every 666 steps". Two schedules
// with the same description give the same factors.
std::string describe(const Schedule& s);

// Parses the command line's --schedule value: constant | cosine | warmup-cosine | step, where
// step may carry its period and factor as "step:STEP_SIZE:GAMMA" (default: total_steps / 3,
// 0.1). `warmup` is --warmup STEPS: allowed with constant (linear warm-up) and required (> 0)
// for warmup-cosine; cosine and step reject it. Throws tlaloc::Error naming the bad value.
Schedule parse_schedule(std::string_view spec, int64_t total_steps, int64_t warmup = 0);

}  // namespace tlaloc::optim
