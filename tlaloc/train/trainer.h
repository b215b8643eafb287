// Trainer: captures model + loss once, derives the gradient (autodiff::value_and_grad), appends
// the optimizer's update (optim::append_update) and compiles that ONE train-step program. It
// owns the resident state -- parameters, optimizer moments, the integer step count -- and
// donates it to the step every call, so the update happens in place. Values decided on the
// host per step (the scheduled lr, the loss scale) enter as scalar inputs: a whole run, any
// schedule, uses one compiled executable. The loss is read back only when asked for.
//
// Lanes (TrainerOptions::lane) only decide which runtime::Executable is compiled: the host
// lane's or the pjrt lane's (the same program emitted as StableHLO, compiled once by the PJRT
// client). The Trainer keeps every step input as a lane buffer (runtime::Buffer): parameters,
// optimizer state and resident data are put on the lane once and stay there, donated every
// step; per step only the per-step data and the scalar inputs whose value changed go up (a step
// that draws its data in the program from its step index, DataInput::step_index, uploads
// nothing), and nothing comes back until read_last() / named_parameters() / ... ask for it.
//
// Asynchronous steps (pjrt lane): step() returns once the device has queued the step, keeping at
// most TrainerOptions::max_in_flight steps pending (StepQueue); every read waits for the steps in
// flight first, and a step that failed on the device is reported there, by its number, as one
// tlaloc::Error; the trainer then refuses every further step and read. The host lane is
// synchronous.
//
// Data inputs are named (DataInput::name): set_resident("images", a), step({{"idx", i}, ...}),
// and inside the loss function d["images"].
//
// Buffers (nn::Buffer: BatchNorm's running statistics) are resident step inputs placed right
// after the data; those a training-mode forward updates come back as extra outputs after the
// loss function's own (build_gradient) and replace the inputs after every step.
//
// Frozen parameters (nn::Parameter::requires_grad false, nn::freeze) are resident step inputs
// placed after the buffers: put on the lane once, read every step, never donated; the step forms
// no gradient and keeps no optimizer state for them (fine-tuning, LoRA's base weights).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tlaloc/nn/module.h"
#include "tlaloc/optim/schedule.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/runtime/executable.h"
#include "tlaloc/runtime/pjrt/executable.h"
#include "tlaloc/train/lane.h"
#include "tlaloc/train/step_queue.h"

namespace tlaloc::train {

// A data input of the step. Resident inputs (a whole dataset) are set once with
// set_resident() and stay on the lane; the others are passed to every step() call.
struct DataInput {
  std::string name;
  ir::TensorType type;
  bool resident = false;
  // A per-step input whose leading axis is the batch (type: the global batch). Under data
  // parallelism each rank's step takes its rows of it: rank r of N the r-th of N equal parts.
  bool batched = false;
  // The step's own index (type s32 [], not resident, not batched): the Trainer feeds it, equal
  // to steps_taken() before the step (a step past 2^31 - 1 is refused), kept on the lane and
  // advanced by the program itself, so per-step draws (batch positions, dropout keys:
  // random::fold_in(key, step)) need no upload. Set again from the step count by load_state. The
  // train step only: an evaluation refuses it.
  bool step_index = false;
};

// Named host arrays: a step's per-step inputs, an evaluation's inputs. Order does not matter.
using Batch = std::vector<std::pair<std::string, Array>>;

// The data tensors a loss function sees during the capture, looked up by DataInput name.
class Inputs {
 public:
  Inputs(std::span<const trace::Tensor> tensors, std::span<const std::string> names)
      : tensors_(tensors), names_(names) {}
  // Throws tlaloc::Error naming `name` and the inputs there are when there is no such input.
  const trace::Tensor& operator[](std::string_view name) const;
  bool contains(std::string_view name) const;
  size_t size() const { return tensors_.size(); }

 private:
  std::span<const trace::Tensor> tensors_;
  std::span<const std::string> names_;
};

// (model, data tensors) -> {loss (floating scalar), aux outputs...}.
using LossFn = std::function<std::vector<trace::Tensor>(nn::Module&, const Inputs&)>;

struct TrainerOptions {
  optim::UpdateOptions update;  // parameter groups, clipping, found-inf check
  // lr factor per step (constant by default); one that changes the lr is computed inside the
  // step from its index (optim::UpdateOptions::schedule), so no lr goes up per step.
  optim::Schedule schedule;
  double grad_scale = 1.0;      // gradients are divided by this in the program
  int num_threads = 0;          // host lane threads (0: OpenMP default)
  Lane lane = Lane::host;       // automatic is resolved with choose_lane() in the constructor
  runtime::pjrt::Options pjrt;  // pjrt lane: emit precision, XLA option overrides
  // pjrt lane: the client (borrowed; must outlive the Trainer). Null: the process-wide client
  // of runtime::pjrt::probe().
  runtime::pjrt::Client* client = nullptr;
  // pjrt lane: how many steps may be queued on the device at once. step() returns without
  // waiting for its step; with max_in_flight pending it first waits for the oldest. 0: step()
  // waits for its own step. >= 0 (tlaloc::Error otherwise). No effect on the host lane.
  int max_in_flight = 2;
  // Data parallelism runs over distributed::world() (one process unless started by mpirun):
  // every rank runs the step on its rows of each batched input (DataInput::batched) and the
  // program all-reduces the loss, aux outputs and gradients (update.replicas and
  // update.replica_loss: the Trainer sets replicas). zero = 1 is ZeRO stage 1: each rank keeps
  // and updates the optimizer state of its 1/N chunk of every parameter, then the updated
  // parameters are all-gathered (optim/zero.h); checkpoints hold the whole state as without
  // it. Host lane only.
  int zero = 0;
  // Flat optimizer state (optim/flat_state.h): one tensor per parameter group and moment, each
  // updated by one op, instead of one per parameter; the same bits and the same checkpoints.
  // Unset: on for the pjrt lane (fewer kernels), off on the host lane (it would copy the
  // parameters and gradients into and out of the buckets) unless update.flat_state is set.
  std::optional<bool> flat_state;
  // Mixed precision (--precision): the compute type of the model's dots and attention
  // (trace::Autocast): f32; bf16 (operands rounded to bf16, f32 accumulation and results;
  // norms, softmax, losses and the update in f32; master parameters and state f32); f16 the
  // same in f16, with dynamic loss scaling (update.loss_scaling, GradScaler's defaults when
  // unset). Evaluation programs use it too.
  DType precision = DType::f32;
};

// What one step reports when its outputs are read (see Trainer::read_last()).
struct StepReport {
  double loss = 0;
  bool found_inf = false;  // the update was skipped
  double grad_norm = -1;   // with clipping, else -1
  std::vector<Array> aux;  // the loss function's extra outputs
};

// The model's parameters (indices into named_parameters()) in the order the programs below take
// them: the frozen ones (requires_grad false), then the trained ones, each in model order.
std::vector<size_t> parameter_order(nn::Module& model);
// How many parameters require a gradient.
int num_trainable(nn::Module& model);

// The gradient program of `loss` on `model`: (data..., frozen..., params...) -> (loss, aux...,
// grads...), one gradient per trained parameter (requires_grad) in model order, none for the
// frozen ones (no cotangent is formed for them), by capture, value_and_grad, simplify.
// The size of the forward program goes to *forward_ops when given. The inputs a step gives a
// new value come last among aux: buffers a training-mode forward updated (BatchNorm's running
// statistics), then each step_index input plus one; *input_updates gets their input positions
// in that order.
// `compute`: the dots' operand type (trace::Autocast: f32, bf16 or f16). `loss_seed`: G takes
// the loss scale as its last input before the parameters (optim/update.h, loss scaling).
ir::Function build_gradient(nn::Module& model, const LossFn& loss,
                            const std::vector<DataInput>& data, int64_t* forward_ops = nullptr,
                            std::vector<size_t>* input_updates = nullptr,
                            DType compute = DType::f32, bool loss_seed = false);

// The whole train-step program of `loss` on `model` (capture, value_and_grad, append_update,
// simplify), without compiling it: what the Trainer runs and what `tlaloc export` prints.
// Parameter types come from the model's current values. Sizes of the forward and gradient
// programs are written to *forward_ops / *gradient_ops when given.
optim::TrainStep build_train_step(nn::Module& model, const LossFn& loss,
                                  const std::vector<DataInput>& data, const optim::Optimizer& opt,
                                  const optim::UpdateOptions& update = {},
                                  int64_t* forward_ops = nullptr, int64_t* gradient_ops = nullptr,
                                  std::vector<size_t>* input_updates = nullptr,
                                  DType compute = DType::f32,  // f16: loss scaling on (defaults)
                                  ir::Function* gradient = nullptr);  // its gradient program

class Trainer {
 public:
  // Captures, differentiates, appends the update and compiles. Parameters come from the
  // model's current values (init() it first). Throws tlaloc::Error for a non-scalar loss,
  // bad hyper-parameters, mismatched shapes or two data inputs of one name (naming them).
  Trainer(nn::Module& model, LossFn loss, std::vector<DataInput> data, optim::Optimizer opt,
          TrainerOptions options = {});
  ~Trainer();

  // Sets the resident data input `name` (put on the lane once; moved, not copied, on the host
  // lane), after the steps in flight, which read the old value, are done (a per-epoch value
  // such as fmnist's row order). Throws tlaloc::Error if there is no resident input of that
  // name or `value`'s dtype or shape differs from its DataInput::type.
  void set_resident(std::string_view name, Array value);
  // Runs one step on `inputs`: every per-step (non-resident) data input by name. Throws
  // tlaloc::Error naming a missing, unknown, repeated or mistyped input, a resident input
  // never set, or a step past 2^31 - 1 when the program counts steps in s32 (a schedule or a
  // step_index input); nothing runs then.
  void step(Batch inputs);
  // Reads the last step's outputs (loss, found-inf, grad norm, aux); on the pjrt lane this is
  // the only per-step download.
  StepReport read_last() const;
  // Waits for every step in flight (pjrt lane; nothing to wait for on the host lane). Throws
  // tlaloc::Error "Trainer: step N failed on the device: <plugin message> ..." for the first step
  // that failed; from then on step(), wait() and every read below (read_last, named_parameters,
  // optimizer_state, run_eval, load_state, ...) throw that same error.
  void wait() const { queue_.wait_all(); }
  // Steps dispatched and not yet waited for (0 on the host lane).
  int in_flight() const { return int(queue_.size()); }
  // The lane the step runs on (host or pjrt).
  Lane lane() const { return lane_; }
  // The pjrt client in use (null on the host lane).
  runtime::pjrt::Client* client() const { return client_; }
  // Steps taken by this trainer (calls of step(), skipped updates included): drives the
  // schedule. The optimizer's own count (applied updates) is optimizer_step().
  int64_t steps_taken() const { return steps_taken_; }
  int64_t optimizer_step() const;
  // Dynamic loss scaling (f16): whether the step has it; the scale now (reads it).
  bool loss_scaling() const { return step_.state.find(-1, optim::StateKind::loss_scale) >= 0; }
  double loss_scale() const;
  // Whether the last step skipped its update (reads one flag). Throws before the first step.
  bool last_skipped() const;
  // With loss scaling, the skip flags of the steps not read by an earlier call, oldest first, as
  // (step number: steps_taken() after it, skipped): `finished_only`, only the steps no longer
  // in flight (on pjrt read without waiting; on the host lane every step); else all of them
  // (waits). Empty without loss scaling. fit counts skips in a row with it, so an f16 run on
  // pjrt does not wait for every step.
  std::vector<std::pair<int64_t, bool>> take_skips(bool finished_only);
  double current_lr() const;         // the lr factor x base lr of group 0 for the next step
  double lr_at(int64_t step) const;  // the same for the 0-based step `step` (>= 0)

  // Copies the resident trained parameters back into the model's Parameter values.
  void sync_to_model();
  // The trained parameters (requires_grad) with dotted names (copies of the resident values),
  // in model order: what the optimizer updates and a checkpoint holds.
  std::vector<std::pair<std::string, Array>> named_parameters() const;
  // The frozen ones (requires_grad false when the Trainer was made), in model order: resident
  // step inputs of their own, read by the step, never donated nor changed.
  std::vector<std::pair<std::string, Array>> frozen_parameters() const;
  // The model's buffers (copies of the resident values) with dotted names, in model order; their
  // specs; and replacing them (e.g. from a checkpoint; tlaloc::Error naming a mismatch).
  std::vector<std::pair<std::string, Array>> named_buffers() const;
  std::vector<std::pair<std::string, ir::TensorType>> buffer_specs() const;
  void load_buffers(std::vector<Array> buffers);
  // Optimizer state with names "optimizer.<param>.<exp_avg|...>" and "optimizer.step". With
  // ZeRO-1 the whole state, gathered from every rank: a collective, every rank must call it.
  std::vector<std::pair<std::string, Array>> optimizer_state() const;
  // How many optimizer state elements (moments; the step count aside) each rank holds: all of
  // them on every rank, or with ZeRO-1 about 1/N each. A collective.
  std::vector<int64_t> state_elements_per_rank() const;
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
  const optim::Schedule& schedule() const { return options_.schedule; }
  bool zero() const { return step_.zero.has_value(); }  // ZeRO-1 in this step
  // Whether a per-step input is DataInput::batched (split over data-parallel processes).
  bool splits_batches() const;

  // Compiles, on the trainer's lane, a forward-only function of the model (e.g. evaluation)
  // whose data inputs are `data` (names and types; `resident` is ignored: all are passed to
  // run_eval) followed by the current parameters, which run_eval() lends it. Returns its id.
  int add_eval(LossFn fn, std::vector<DataInput> data);
  // Runs evaluation `id` on `data` (every input of add_eval by name, as for step()), the
  // parameters lent (not donated) and taken back even when the run throws. `data` is borrowed:
  // on the host lane its arrays are moved in and back, never copied.
  std::vector<Array> run_eval(int id, Batch& data);

 private:
  friend struct CrossCheckAccess;  // train/cross_check.cpp: runs parts of the step on both lanes
  // The state a checkpoint holds (without ZeRO-1, the step's own) and the name of its slot j:
  // "optimizer.<param>.<kind>" or "optimizer.step".
  const optim::StateLayout& full_state_layout() const;
  std::string state_name(int j) const;
  std::unique_ptr<runtime::Executable> compile(const ir::Function& f) const;
  void put_input(int index, Array value);  // onto the lane
  void put_step_inputs(Batch& inputs);     // per-step data and scalars
  // Every step_index input, and the schedule's step, set to steps_taken_ (construction,
  // load_state).
  void put_step_indices();
  // What in the program counts steps in s32 ("the schedule in the program", "the program's
  // step index"), or null when nothing does.
  const char* s32_step_counter() const;
  // The same once every step in flight is done (cross_check's).
  void set_step_inputs(Batch& inputs) {
    wait();
    put_step_inputs(inputs);
  }

  nn::Module& model_;
  optim::Optimizer opt_;
  TrainerOptions options_;
  std::vector<DataInput> data_;        // as given: batched inputs hold the global batch
  std::vector<DataInput> local_data_;  // as the step takes them: this rank's rows
  // Input index of the first (frozen, else trained) parameter: after the data and buffers.
  size_t first_param() const { return data_.size() + buffer_names_.size(); }

  std::vector<std::string> param_names_, frozen_names_, buffer_names_;
  // Inputs (positions) the step gives new values: buffers, step indices (build_gradient), in
  // the order of their outputs, which follow the loss function's own aux outputs (user_aux()).
  std::vector<size_t> input_updates_;
  int user_aux() const { return step_.num_aux - int(input_updates_.size()); }
  // The model's parameters (named_parameters() indices) in step input order: frozen, trained.
  std::vector<size_t> order_;
  optim::TrainStep step_;
  ir::Function gradient_;  // the step's gradient program (build_gradient), for cross_check
  Lane lane_ = Lane::host;
  runtime::pjrt::Client* client_ = nullptr;  // pjrt lane
  std::unique_ptr<runtime::Executable> exe_;
  // The step's inputs on the lane (params / state refilled from the outputs after each step;
  // resident data set once) and the last step's outputs.
  std::vector<runtime::Buffer> inputs_;
  std::vector<runtime::Buffer> outputs_;
  // The last step's found_inf (moved out of outputs_, shared with unread_skips_) and, with loss
  // scaling, the flags take_skips has not read yet with their step numbers.
  std::shared_ptr<runtime::Buffer> last_found_inf_;
  std::deque<std::pair<int64_t, std::shared_ptr<runtime::Buffer>>> unread_skips_;
  // The values of the scalar inputs (lr per group, grad_scale) now in inputs_: one is put on
  // the lane again only when its value changes (a constant schedule uploads them once a run).
  std::vector<double> scalars_;
  int64_t steps_taken_ = 0;
  int64_t forward_ops_ = 0, gradient_ops_ = 0;
  struct Eval {
    std::unique_ptr<runtime::Executable> exe;
    std::vector<DataInput> data;
  };
  std::vector<Eval> evals_;
  // The steps in flight; last, so that it is destroyed (waiting for them) before their buffers.
  mutable StepQueue queue_;
};

}  // namespace tlaloc::train
