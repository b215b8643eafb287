// Optimizers with PyTorch's hyper-parameter names and torch 1.13 semantics
// (https://pytorch.org/docs/1.13/optim.html; torch/optim/{sgd,adam,adamw}.py, single-tensor path):
//
//   SGD   g ← ±g + wd·p;  b ← g (first step) | μ·b + (1−τ)·g;  d ← g + μ·b (nesterov) | b;
//         p ← p − lr·d
//   Adam  g ← ±g + wd·p (L2 in the gradient);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//         v̂max ← max(v̂max, v) (amsgrad: running max of the UNcorrected v);
//         p ← p − lr/(1−β1^t) · m / (√v / √(1−β2^t) + eps)   (eps outside the root)
//   AdamW as Adam, but the decay is decoupled: p ← p·(1 − lr·wd) before the update.
//
// Each optimizer has a host reference step (reference_step, the oracle; bias corrections in f64
// from the integer step count) and an in-program update (append_update in update.h).
//
// Optimizer state is a flat list of tensors (state_layout): for parameter i, in parameter order,
//   SGD with momentum != 0: "<name>.momentum_buffer"
//   Adam / AdamW:            "<name>.exp_avg", "<name>.exp_avg_sq", ["<name>.max_exp_avg_sq"]
// all of the master parameter's type, followed by "step": an s32 scalar counting the updates
// applied (skipped non-finite steps do not count). s32 counts exactly up to 2^31 − 1 steps;
// bias corrections convert it to f64, which is exact.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/optim/schedule.h"

namespace tlaloc::optim {

struct SGD {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

struct Adam {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  bool amsgrad = false;
  bool maximize = false;
};

struct AdamW {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: p·(1 − lr·wd)
  bool amsgrad = false;
  bool maximize = false;
};

using Optimizer = std::variant<SGD, Adam, AdamW>;

// "SGD", "Adam", "AdamW".
std::string name(const Optimizer& opt);
// The learning rate and weight decay an optimizer was built with.
double base_lr(const Optimizer& opt);
double base_weight_decay(const Optimizer& opt);
// PyTorch's constructor checks: lr, eps, weight_decay, momentum >= 0; 0 <= betas < 1;
// nesterov needs momentum > 0 and dampening == 0. Throws tlaloc::Error naming the value.
void validate(const Optimizer& opt);

// A parameter group (PyTorch's param_groups): parameters by index with their own lr and
// weight_decay (unset: the optimizer's).
struct ParamGroup {
  std::string name;
  std::vector<int> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// The common recipe: group "decay" (weight_decay) holds parameters of rank >= 2 whose last
// name component is not "bias" and no component contains "norm"; group "no_decay" (0) holds
// the rest (biases, LayerNorm / RMSNorm / BatchNorm weights, other vectors). Empty groups are
// dropped. Throws if names and shapes differ in length.
std::vector<ParamGroup> decay_groups(std::span<const std::string> names,
                                     std::span<const Shape> shapes, double weight_decay);

// Groups with lr / weight_decay filled from the optimizer where unset; an empty list becomes
// one group "all" with every parameter. Throws unless every parameter in [0, num_params) is in
// exactly one group.
std::vector<ParamGroup> resolve_groups(const Optimizer& opt, std::vector<ParamGroup> groups,
                                       int num_params);

// What the update does besides the optimizer's rule (see update.h for the program's view).
struct UpdateOptions {
  std::vector<ParamGroup> groups;  // empty: one group with the optimizer's lr / weight_decay
  // Clip gradients by their global L2 norm over all parameters (torch.nn.utils.
  // clip_grad_norm_: g ← g · min(1, max_norm / (norm + 1e-6))); the norm is reported.
  std::optional<double> max_norm;
  // Compute the found-inf flag (inf or NaN in any unscaled gradient skips the whole update).
  // Off only for benchmarks of the bare update; the flag output is then always false.
  bool check_finite = true;
  // Data parallelism (distributed/): how many processes run this step together, each on its
  // share of every global batch (distributed::world().size()). With more than one, the loss,
  // the aux outputs and every gradient go through an all_reduce (summed in rank order, the same
  // bits on every rank) before found-inf, clipping and the update, which therefore see the
  // global gradient. `replica_loss` says how the ranks' losses make the global one: mean (each
  // rank's loss is a mean over an equal share of the batch: the sums are divided by replicas),
  // or sum (each rank's loss is already divided by the global batch's count). Floating aux
  // outputs (and updated buffers: BatchNorm's running statistics) are averaged, integer ones
  // summed, i1 ones or-ed; the last `replicated_aux` aux outputs, equal on every rank by
  // construction (the Trainer's next step index), pass through as they are.
  int replicas = 1;
  int replicated_aux = 0;
  enum class ReplicaLoss { mean, sum } replica_loss = ReplicaLoss::mean;
  // ZeRO stage (optim/zero.h): 0, or 1 with replicas > 1: this process (`rank`) keeps and
  // updates the optimizer state of its shard of the parameters only, then all-gathers them.
  int zero = 0;
  int rank = 0;
  // Dynamic loss scaling inside the program (torch.cuda.amp.GradScaler's rule and defaults),
  // for f16 compute: the loss is multiplied by `scale` (f32 state) before the gradient, the
  // gradients divided by it; a step whose gradients hold an inf or NaN is skipped and
  // scale *= backoff_factor; after growth_interval finite steps in a row scale *= growth_factor
  // (kept only when finite). The gradient function then takes the scale as its last input
  // before the parameters (see update.h).
  struct LossScaling {
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  std::optional<LossScaling> loss_scaling;
  // The lr schedule inside the program: the step then takes the s32 scalar `schedule_step` (the
  // 0-based index of the step, after grad_scale) and returns it plus one (the last output); each
  // group's lr input is its base lr, multiplied in the program by schedule->factor_in_program
  // (so the lr inputs never change and nothing goes up per step). Unset: the lr inputs are the
  // scheduled lrs.
  std::optional<Schedule> schedule;
  // Keep the optimizer state flat (optim/flat_state.h): one tensor per parameter group, master
  // dtype and kind, updated by one op, instead of one per parameter. The same bits; fewer
  // kernels under XLA, copies on the host lane. Not with ZeRO-1 (tlaloc::Error).
  bool flat_state = false;
};

// loss_scale and growth_tracker are the loss scaler's (UpdateOptions::loss_scaling): f32 and
// s32 scalars just before the step count.
enum class StateKind {
  momentum_buffer,
  exp_avg,
  exp_avg_sq,
  max_exp_avg_sq,
  loss_scale,
  growth_tracker,
  step
};
std::string_view name(StateKind k);

struct StateSlot {
  std::string name;  // "0.weight.exp_avg", "step"
  StateKind kind;
  int param;  // parameter index; -1 for the step count and the loss scaler's scalars
  ir::TensorType type;
  double init = 0;  // the value init_state fills it with
  int bucket = -1;  // flat state (optim/flat_state.h): its bucket (param is then -1)
};

struct StateLayout {
  std::vector<StateSlot> slots;
  int size() const { return int(slots.size()); }
  int step_index() const { return size() - 1; }  // the step count is last
  // Index of (param, kind), or -1 when the optimizer keeps no such tensor. Flat buckets' slots
  // are found by find_bucket only.
  int find(int param, StateKind kind) const;
  int find_bucket(int bucket, StateKind kind) const;
};

// The master type for a parameter of type t: f64 stays f64, other floats become f32.
ir::TensorType master_type(const ir::TensorType& t);
// State tensors for parameters of the given (master) types; names default to "0", "1", ...
StateLayout state_layout(const Optimizer& opt, std::span<const ir::TensorType> params,
                         std::span<const std::string> names = {});
// Inserts the loss scaler's slots (scale = s.init_scale, growth_tracker 0) before the step
// count. Throws tlaloc::Error naming a hyper-parameter out of range (init_scale finite and > 0,
// growth_factor finite and > 1, backoff_factor in (0, 1), growth_interval in [1, 2^31 - 1]).
void add_loss_scaling(StateLayout& layout, const UpdateOptions::LossScaling& s);
// Zero moments and step 0 (a slot's `init`), one Array per slot.
std::vector<Array> init_state(const StateLayout& layout);

// What one reference step saw.
struct StepInfo {
  bool found_inf = false;
  double grad_norm = 0;  // global L2 norm of the unscaled gradients (before clipping)
};

// The host reference step, written from the formulas above in f64 per element (results
// rounded to the parameter / state dtype). params: master parameters (f32 or f64), updated in
// place; grads: one per parameter, same shape, any float dtype; state: as init_state made for
// these parameters, updated in place; lr: one per resolved group; grad_scale: gradients are
// divided by it first (torch.cuda.amp.GradScaler). An inf or NaN in any unscaled gradient
// leaves params and state untouched and sets found_inf. Throws tlaloc::Error on mismatched
// counts, shapes or dtypes.
StepInfo reference_step(const Optimizer& opt, const UpdateOptions& options, std::span<Array> params,
                        std::span<const Array> grads, std::span<Array> state,
                        std::span<const double> lr, double grad_scale = 1.0);

}  // namespace tlaloc::optim
