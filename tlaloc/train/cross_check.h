// The pjrt lane checked against the host lane before training (train::fit prints it).
//
// Comparing parameters after one whole Adam step says little: Adam moves every element by about
// ±lr whatever its gradient's size, so a wrong gradient passes and a right one looks alarming.
// The check instead runs the two parts of the step on their own, from the trainer's current
// state, on both lanes:
//
//   1. The gradient program (loss, gradients: the step's own build_gradient program, with its
//      autocast precision and, with loss scaling, the scale from the optimizer state as its loss
//      seed) on the same batch. The loss is scored by |device − host| / |host|, each gradient
//      tensor by its relative L2 error ‖device − host‖₂ / ‖host‖₂.
//   2. The optimizer update alone (optim::append_update on a function whose "gradients" are
//      inputs), fed the HOST lane's loss and gradients on both lanes, from the same parameters
//      and state, lr and grad scale. Each updated parameter and state tensor is scored by the
//      relative L2 error of its CHANGE: ‖device' − host'‖₂ / ‖host' − before‖₂ (so an update
//      wrong by 5% scores 0.05 however small lr is next to the parameter); found_inf and the
//      integer step count must be equal; the clipping grad_norm is scored like the loss.
//
// Relative scores divide by max(‖host‖₂, FLT_MIN): a host tensor that is exactly zero scores 0
// when the device's is zero too and >= 1 (a failure) otherwise. A NaN or inf on either side is
// a failure of that tensor, named ("NaN on the device"), whatever the other side holds. Norms
// are accumulated in f64 (scaled, so no f64 overflow). The loss function's aux outputs (e.g.
// accuracy counts, whose argmax ties may differ between lanes) are not scored.
//
// Thresholds (cross_check_thresholds): the loss 1e-3 and every gradient 1e-2 at XLA's default
// dot precision (TF32 on recent GPUs: 10-bit mantissa operands), 1e-5 with full-f32 dots
// (--matmul-precision highest; high keeps the default's); the update 1e-2 at either (it has no
// dots; given the same gradients, f32 rounding makes it ~1e-6, a wrong formula O(1)). A score equal
// to its threshold passes.
//
// Nothing of the trainer changes: no buffer is donated, its parameters, state, buffers and step
// count are as before (the per-step data and scalars of `inputs` are put in its input slots, as
// the next step() would).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

// The largest score that passes, per part (relative errors, dimensionless).
struct CrossCheckThresholds {
  double loss = 1e-3;
  double gradient = 1e-2;
  double update = 1e-2;
};
// Those of the pjrt lane's dot precision: HIGHEST 1e-5 / 1e-5 / 1e-2, else 1e-3 / 1e-2 / 1e-2.
CrossCheckThresholds cross_check_thresholds(stablehlo::Precision p);

// One tensor's score.
struct TensorScore {
  std::string name;  // "loss", a parameter's dotted name, a state slot's, "found_inf", ...
  // The relative error (see the top); +inf when `problem` is set.
  double score = 0;
  double diff_norm = 0;  // ‖device − host‖₂
  double ref_norm = 0;  // the denominator before flooring: ‖host‖₂ or ‖host' − before‖₂
  // Empty, or what makes it a failure whatever the threshold: "NaN on the device", "inf on the
  // host", "differs (device 1, host 0)" (found_inf, the step count).
  std::string problem;
  bool passed(double threshold) const { return problem.empty() && score <= threshold; }
};

// ‖device − host‖₂ / max(‖host‖₂, FLT_MIN) over the elements (any numeric dtype, read as f64).
// Integer and i1 tensors are compared exactly: score 0 when equal, else +inf with `problem`.
// Throws tlaloc::Error naming `name` when the shapes differ.
TensorScore relative_l2(std::string name, const Array& device, const Array& host);
// The update's score: ‖device − host‖₂ / max(‖host − before‖₂, FLT_MIN), NaN / inf in device or
// host a `problem` (in `before`: not scored, the same on both sides). Integer tensors as above.
TensorScore relative_change(std::string name, const Array& device, const Array& host,
                            const Array& before);

struct CrossCheckReport {
  CrossCheckThresholds thresholds;
  TensorScore loss;
  std::vector<TensorScore> gradients;  // one per trained parameter, in parameter order
  // Each parameter's change, then each state slot's (names "optimizer.<param>.<kind>",
  // "optimizer.step", "scaler.<kind>"), found_inf, and grad_norm with clipping.
  std::vector<TensorScore> update;

  // The largest score of each part (the first one on ties; a problem counts as +inf).
  const TensorScore& worst_gradient() const;
  const TensorScore& worst_update() const;
  bool loss_passed() const { return loss.passed(thresholds.loss); }
  bool gradients_passed() const { return worst_gradient().passed(thresholds.gradient); }
  bool update_passed() const { return worst_update().passed(thresholds.update); }
  bool passed() const { return loss_passed() && gradients_passed() && update_passed(); }
  // One line, e.g. "cross-check vs host lane passed: loss rel 3.1e-06 (<= 1e-03), gradients max
  // rel L2 2.0e-04 at 0.weight (<= 1e-02), update max rel L2 1.1e-07 at 2.bias (<= 1e-02)";
  // "FAILED" in place of "passed", each failing part marked "FAILED" ("... 5.0e-02 at 2.weight
  // (> 1e-02) FAILED", "... inf at 0.bias (NaN on the device) FAILED").
  std::string summary() const;
};

// What train::fit does with the check before training on the pjrt lane (FitOptions::cross_check,
// `tlaloc train --cross-check`): off; warn (the default): print the summary and, when it failed,
// a warning line naming the worst tensor, then train; require: a failed check is a tlaloc::Error
// before the first step. Warn is the default as XLA's own autotuner's result checks are (they
// log a mismatch unless xla_gpu_crash_on_verification_failures): the thresholds leave room for
// TF32's rounding, but a badly conditioned tensor (a bias gradient summed over a batch with
// cancellation) can approach them, and a false alarm should not cost a run; a lane bug shows
// up as an O(1) error that the line makes plain, and require makes a pipeline stop on it.
enum class CrossCheckMode { off, warn, require };
// "off" | "warn" | "require"; throws tlaloc::Error naming anything else.
CrossCheckMode parse_cross_check_mode(std::string_view s);

// Runs the check described at the top on `t` with `inputs` (every per-step input by name, as for
// Trainer::step). Throws tlaloc::Error on the host lane, for bad inputs (Trainer::step's errors)
// and when either lane fails to compile or run a part; a failed check is a report, not an error.
CrossCheckReport cross_check(Trainer& t, Batch inputs);

}  // namespace tlaloc::train
