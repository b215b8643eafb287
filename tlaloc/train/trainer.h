// Trainer: captures model + loss once, derives the gradient (autodiff::value_and_grad), appends
// the optimizer's update (optim::append_update) and compiles that ONE train-step program. It
// owns the resident state -- parameters, optimizer moments, the integer step count -- and
// donates it to the step every call, so the update happens in place. Values decided on the
// host per step (the scheduled lr, the loss scale) enter as scalar inputs: a whole run, any
// schedule, uses one compiled executable. The loss is read back only when asked for.
//
// Lanes (TrainerOptions::lane): on the host lane the state lives in host Arrays; on the pjrt
// lane the same program is emitted as StableHLO and compiled once by the PJRT client, and the
// parameters, optimizer state and resident data are uploaded once and stay device buffers,
// donated every step (tf.aliasing_output); only per-step inputs and the scalar inputs are
// uploaded per step, and nothing is read back until read_last() / named_parameters() / ...
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/nn/module.h"
#include "tlaloc/optim/schedule.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/runtime/executable.h"
#include "tlaloc/runtime/pjrt/executable.h"
#include "tlaloc/train/lane.h"

namespace tlaloc::train {

// A data input of the step. Resident inputs (a whole dataset) are set once with
// set_resident() and stay on the lane; the others are passed to every step() call.
struct DataInput {
  std::string name;
  ir::TensorType type;
  bool resident = false;
};

// (model, data tensors in DataInput order) -> {loss (floating scalar), aux outputs...}.
using LossFn =
    std::function<std::vector<trace::Tensor>(nn::Module&, std::span<const trace::Tensor>)>;

struct TrainerOptions {
  optim::UpdateOptions update;  // parameter groups, clipping, found-inf check
  optim::Schedule schedule;     // lr factor per step (constant by default)
  double grad_scale = 1.0;      // gradients are divided by this in the program
  int num_threads = 0;          // host lane threads (0: OpenMP default)
  Lane lane = Lane::host;       // automatic is resolved with choose_lane() in the constructor
  runtime::pjrt::Options pjrt;  // pjrt lane: emit precision, XLA option overrides
  // pjrt lane: the client (borrowed; must outlive the Trainer). Null: the process-wide client
  // of runtime::pjrt::probe().
  runtime::pjrt::Client* client = nullptr;
};

// One step of the host lane and of the pjrt lane from the same state and inputs, compared
// output by output (loss, aux, params', state', ...). rel = max|device - host| / max|host| of
// the output where that ratio is largest (max|host| floored at 1e-30).
struct CrossCheck {
  double max_abs = 0;
  double max_rel = 0;
  std::string worst;  // name of the output with the largest rel
};

// What one step reports when its outputs are read (see Trainer::read_last()).
struct StepReport {
  double loss = 0;
  bool found_inf = false;  // the update was skipped
  double grad_norm = -1;   // with clipping, else -1
  std::vector<Array> aux;  // the loss function's extra outputs
};

// The gradient program of `loss` on `model`: (data..., params...) -> (loss, aux..., grads...),
// one gradient per parameter in named_parameters() order (capture, value_and_grad, simplify).
// The size of the forward program goes to *forward_ops when given.
ir::Function build_gradient(nn::Module& model, const LossFn& loss,
                            const std::vector<DataInput>& data, int64_t* forward_ops = nullptr);

// The whole train-step program of `loss` on `model` (capture, value_and_grad, append_update,
// simplify), without compiling it: what the Trainer runs and what `tlaloc export` prints.
// Parameter types come from the model's current values. Sizes of the forward and gradient
// programs are written to *forward_ops / *gradient_ops when given.
optim::TrainStep build_train_step(nn::Module& model, const LossFn& loss,
                                  const std::vector<DataInput>& data, const optim::Optimizer& opt,
                                  const optim::UpdateOptions& update = {},
                                  int64_t* forward_ops = nullptr, int64_t* gradient_ops = nullptr);

class Trainer {
 public:
  // Captures, differentiates, appends the update and compiles. Parameters come from the
  // model's current values (init() it first). Throws tlaloc::Error for a non-scalar loss,
  // bad hyper-parameters, or mismatched shapes (naming them).
  Trainer(nn::Module& model, LossFn loss, std::vector<DataInput> data, optim::Optimizer opt,
          TrainerOptions options = {});
  ~Trainer();

  // Sets resident data input `index` (an index into the DataInput list). Checked by type.
  void set_resident(int index, Array value);
  // Runs one step; `inputs` are the non-resident data inputs in DataInput order.
  void step(std::vector<Array> inputs);
  // Reads the last step's outputs (loss, found-inf, grad norm, aux); on the pjrt lane this is
  // the only per-step download.
  StepReport read_last() const;
  // The lane the step runs on (host or pjrt).
  Lane lane() const { return lane_; }
  // pjrt lane only: runs the step once on the host lane and once on the device from the
  // current state with `inputs` (as for step()) without changing any state, and compares.
  // Throws tlaloc::Error on the host lane.
  CrossCheck cross_check(std::vector<Array> inputs);
  // The pjrt client in use (null on the host lane).
  runtime::pjrt::Client* client() const { return client_; }
  // Steps taken by this trainer (calls of step(), skipped updates included): drives the
  // schedule. The optimizer's own count (applied updates) is optimizer_step().
  int64_t steps_taken() const { return steps_taken_; }
  int64_t optimizer_step() const;
  double current_lr() const;  // the lr factor x base lr of group 0 for the next step

  // Copies the resident parameters back into the model's Parameter values.
  void sync_to_model();
  // Parameters with dotted names (copies of the resident values).
  std::vector<std::pair<std::string, Array>> named_parameters() const;
  // Optimizer state with names "optimizer.<param>.<exp_avg|...>" and "optimizer.step".
  std::vector<std::pair<std::string, Array>> optimizer_state() const;
  // Names, dtypes and shapes of the parameters and of the optimizer state, in the orders
  // named_parameters() / optimizer_state() use.
  std::vector<std::pair<std::string, ir::TensorType>> parameter_specs() const;
  std::vector<std::pair<std::string, ir::TensorType>> state_specs() const;
  // Replaces parameters and optimizer state (e.g. restored from a checkpoint), in spec order,
  // and the schedule position. Throws tlaloc::Error naming each array whose count, dtype or
  // shape differs; nothing is changed then.
  void load_state(std::vector<Array> params, std::vector<Array> state, int64_t steps_taken);

  // Program sizes (ops) and the program itself, for reports and export.
  int64_t forward_ops() const { return forward_ops_; }
  int64_t gradient_ops() const { return gradient_ops_; }
  const ir::Function& step_function() const { return step_.fn; }
  const optim::TrainStep& train_step() const { return step_; }
  const optim::Optimizer& optimizer() const { return opt_; }

  // Compiles a forward-only function of the model (e.g. evaluation) that takes the current
  // parameters after its own data inputs: run_eval() feeds them. `data` is borrowed (moved in
  // and back, never copied).
  int add_eval(LossFn fn, std::vector<ir::TensorType> data_types);
  std::vector<Array> run_eval(int id, std::vector<Array>& data);

 private:
  // Checkpoint name of state slot j: "optimizer.<param>.<kind>" or "optimizer.step".
  std::string state_name(int j) const;
  nn::Module& model_;
  optim::Optimizer opt_;
  TrainerOptions options_;
  std::vector<DataInput> data_;
  std::vector<std::string> param_names_;
  optim::TrainStep step_;
  std::unique_ptr<runtime::Executable> exe_;
  std::vector<Array> inputs_;   // the step's inputs; params/state are refilled after each step
  std::vector<Array> outputs_;  // the last step's outputs (params/state moved back to inputs_)
  int64_t steps_taken_ = 0;
  int64_t forward_ops_ = 0, gradient_ops_ = 0;
  std::vector<std::unique_ptr<runtime::Executable>> evals_;

  // pjrt lane: the compiled step, its inputs on the device (same indices as inputs_; params,
  // state and resident data stay here between steps) and the last step's outputs.
  Lane lane_ = Lane::host;
  runtime::pjrt::Client* client_ = nullptr;
  std::unique_ptr<runtime::pjrt::PjrtExecutable> dexe_;
  std::vector<runtime::pjrt::Buffer> dinputs_;
  std::vector<runtime::pjrt::Buffer> doutputs_;
  std::vector<std::unique_ptr<runtime::pjrt::PjrtExecutable>> devals_;
  // The scalar inputs (lr per group, grad_scale) now on the device: one is uploaded again only
  // when its value changes (a constant schedule uploads them once per run).
  std::vector<double> dscalars_;

  Array fetch_input(int index) const;  // a copy of step input `index`, from the lane
  void put_input(int index, Array value);
  void set_step_inputs(std::vector<Array>& inputs);  // per-step data and scalars
};

}  // namespace tlaloc::train
