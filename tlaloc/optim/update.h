// The optimizer inside the program: append_update turns a gradient function into the whole
// train step, so one compiled executable runs forward, gradient and update with parameters and
// optimizer state donated to their new values.
//
// Gradient function G (autodiff::value_and_grad's shape):
//   inputs  (other inputs..., params...)       outputs (loss, aux..., grads...)
// with grads[i] of params[i]'s shape (any float dtype; bf16 / f16 gradients are fine).
//
// Train step:
//   inputs  (other inputs..., params..., state..., lr per group..., grad_scale, [schedule_step])
//   outputs (loss, aux..., params'..., state'..., found_inf, [grad_norm], [schedule_step + 1])
//   aliases params' -> params, state' -> state (donated)
// params are master copies: f32 (f64 stays f64); where G takes bf16 / f16 parameters it is fed
// convert(master). state is StateLayout's list (moments of the master type, then the s32 step
// count). lr inputs are f64 scalars, one per resolved parameter group; grad_scale is an f64
// scalar that gradients are divided by (1 without loss scaling). found_inf is an i1 scalar:
// true when any gradient holds an inf or NaN, in which case params', state' (step included)
// equal params, state bit for bit. It is computed as "Σ of every gradient's elements is not
// finite", one reduction over the gradients flattened and concatenated (in f32, f64 when a
// parameter is f64; XLA reads them in one kernel, the host lane sums each gradient in the loop
// that produces it and copies nothing), so finite gradients whose sum overflows (|Σ| ≥ 2^128,
// entries beyond ~1e34) also count; gradients that only overflow when unscaled by a
// grad_scale < 1 do not. grad_norm (f32 scalar, present when max_norm is
// set) is the global L2 norm of the unscaled gradients before clipping, their squares summed in
// f32 as torch.nn.utils.clip_grad_norm_ sums f32 gradients (so it is inf past ~1.8e19 per
// element, and the update then clips to a zero gradient, as PyTorch's does), in f64 when any
// parameter is f64.
//
// Loss scaling (UpdateOptions::loss_scaling, f16 compute): G takes one more input, the f32
// scalar loss scale S, just before the parameters (the Trainer's capture multiplies the loss by
// it before value_and_grad, so G's gradients are S times the loss's while its loss output is
// the unscaled loss). The train step feeds it from the state slot `scale` (not an input of its
// own), divides the gradients by S as well as grad_scale, and writes the scaler's next state
// (StateKind::loss_scale, growth_tracker: GradScaler.update's rule) beside the step count.
//
// Flat state (UpdateOptions::flat_state, optim/flat_state.h): `state` holds one tensor per
// bucket and kind instead of one per parameter and kind; the update runs once per bucket on the
// parameters and gradients concatenated and each parameter's new value is sliced out of it.
//
// Per-step scalars (bias corrections 1 − β^t, the decoupled decay 1 − lr·wd, 1/grad_scale)
// are computed inside the program in f64 from the step count and the lr input, then used as
// f32; nothing per-step is recompiled or read back.
#pragma once

#include <optional>

#include "tlaloc/optim/flat_state.h"
#include "tlaloc/optim/optimizer.h"
#include "tlaloc/optim/zero.h"

namespace tlaloc::optim {

struct TrainStep {
  ir::Function fn;
  int num_other_inputs = 0;
  int num_params = 0;
  int num_aux = 0;
  StateLayout state;
  std::vector<ParamGroup> groups;  // resolved: lr and weight_decay set
  bool has_grad_norm = false;
  bool has_schedule_step = false;  // UpdateOptions::schedule
  // ZeRO-1 (UpdateOptions::zero): this rank's shard; `state` is then its shard_layout().
  std::optional<ZeroShard> zero;
  // UpdateOptions::flat_state: the buckets; `state` is then their flat_layout().
  std::optional<FlatState> flat;
  // The per-parameter layout checkpoints hold (zero->full, flat->full, or state).
  const StateLayout& full_state() const { return zero ? zero->full : flat ? flat->full : state; }

  // Input positions.
  int param_input(int i) const { return num_other_inputs + i; }
  int state_input(int j) const { return num_other_inputs + num_params + j; }
  int lr_input(int group) const { return state_input(state.size()) + group; }
  int grad_scale_input() const { return lr_input(int(groups.size())); }
  int schedule_step_input() const { return has_schedule_step ? grad_scale_input() + 1 : -1; }
  // Output positions.
  int loss_output() const { return 0; }
  int param_output(int i) const { return 1 + num_aux + i; }
  int state_output(int j) const { return param_output(num_params) + j; }
  int found_inf_output() const { return state_output(state.size()); }
  int grad_norm_output() const { return has_grad_norm ? found_inf_output() + 1 : -1; }
  int schedule_step_output() const {
    return has_schedule_step ? found_inf_output() + 1 + int(has_grad_norm) : -1;
  }

  // Each group's lr times `multiplier` (a schedule's factor).
  std::vector<double> group_lr(double multiplier = 1.0) const;
  // The trailing scalar inputs: one f64 lr per group, then f64 grad_scale. Throws if lr has
  // the wrong count or grad_scale <= 0.
  std::vector<Array> scalar_inputs(std::span<const double> lr, double grad_scale = 1.0) const;
  // The full input list for one step: `other` (the batch...), then params and state moved in
  // (they are left empty), then scalar_inputs(lr, grad_scale) (lr: the base lrs with a schedule
  // in the program), then the step's index when has_schedule_step. Throws on wrong counts.
  std::vector<Array> inputs(std::vector<Array> other, std::vector<Array>& params,
                            std::vector<Array>& state, std::span<const double> lr,
                            double grad_scale = 1.0, int64_t schedule_step = 0) const;
  // Moves params' and state' out of a step's outputs into params and state (resized).
  void take_updated(std::vector<Array>& outputs, std::vector<Array>& params,
                    std::vector<Array>& state) const;
};

// Builds the train step from G (see above); `num_params` is the number of trailing inputs of
// G that are parameters (= its trailing gradient outputs). Throws tlaloc::Error naming the
// parameter when a gradient's shape differs from its parameter's or a dtype is not floating,
// and on invalid hyper-parameters or groups.
TrainStep append_update(const Optimizer& opt, const ir::Function& grad_fn, int num_params,
                        const UpdateOptions& options = {});

}  // namespace tlaloc::optim
