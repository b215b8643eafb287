#include "tlaloc/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tlaloc/distributed/communicator.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/step_program.h"

namespace tlaloc::train {

namespace {

// Where each of `want` is in `got` (by name). Throws tlaloc::Error, saying `what` and naming
// the input, for one that is missing, unknown (`resident` names get a hint), given twice,
// empty or of another dtype / shape.
std::vector<size_t> match_inputs(const char* what, const std::vector<const DataInput*>& want,
                                 const Batch& got, const std::vector<DataInput>& resident) {
  std::vector<std::string> names;
  for (const DataInput* d : want) names.push_back(d->name);
  std::vector<size_t> at(want.size(), got.size());
  for (size_t g = 0; g < got.size(); ++g) {
    const std::string& n = got[g].first;
    size_t k = size_t(std::find(names.begin(), names.end(), n) - names.begin());
    if (k == names.size()) {
      for (const auto& r : resident) {
        if (r.resident && r.name == n)
          fail("{}: '{}' is a resident input: set it once with set_resident()", what, n);
        if (r.step_index && r.name == n)
          fail("{}: '{}' is the step index, which the Trainer feeds itself", what, n);
      }
      fail("{}: no input is named '{}' (it takes {})", what, n, join_names(names));
    }
    if (at[k] != got.size()) fail("{}: input '{}' is given twice", what, n);
    at[k] = g;
  }
  for (size_t k = 0; k < want.size(); ++k) {
    if (at[k] == got.size())
      fail("{}: input '{}' is missing (it takes {})", what, names[k], join_names(names));
    const Array& a = got[at[k]].second;
    if (a.raw() == nullptr) fail("{}: input '{}' is an empty array", what, names[k]);
    if (a.dtype() != want[k]->type.dtype || a.shape() != want[k]->type.shape)
      fail("{}: input '{}' is {}, expected {}", what, names[k], describe(a),
           ir::to_string(want[k]->type));
  }
  return at;
}

// Rows [first, first + n) of `a` along its leading axis (a copy).
Array leading_rows(const Array& a, int64_t first, int64_t n) {
  Shape s = a.shape();
  const size_t row = a.nbytes() / size_t(std::max<int64_t>(s[0], 1));
  s[0] = n;
  Array out(a.dtype(), s);
  if (n > 0)
    std::memcpy(out.raw(), static_cast<const char*>(a.raw()) + size_t(first) * row,
                size_t(n) * row);
  return out;
}

}  // namespace

Trainer::Trainer(nn::Module& model, LossFn loss, std::vector<DataInput> data, optim::Optimizer opt,
                 TrainerOptions options)
    : model_(model),
      opt_(std::move(opt)),
      options_(std::move(options)),
      data_(std::move(data)),
      queue_(options_.max_in_flight) {
  options_.schedule.check();
  if (!(options_.grad_scale > 0) || !std::isfinite(options_.grad_scale))
    fail("Trainer: grad_scale {} must be finite and > 0", options_.grad_scale);
  if (options_.num_threads < 0)
    fail("Trainer: num_threads {} must be >= 0 (0: OpenMP's default)", options_.num_threads);
  if (options_.zero != 0 && options_.zero != 1)
    fail("Trainer: ZeRO stage {} is not built (0: off, 1: optimizer state sharded)", options_.zero);
  // Data parallelism: this rank's share of every batched input.
  const int replicas = distributed::world_size();
  options_.update.replicas = replicas;
  options_.update.zero = options_.zero;
  options_.update.rank = distributed::rank();
  // A schedule that changes the lr runs in the program, from the step's index.
  if (options_.schedule.kind != optim::ScheduleKind::constant || options_.schedule.warmup_steps > 0)
    options_.update.schedule = options_.schedule;
  local_data_ = data_;
  for (DataInput& d : local_data_) {
    if (d.step_index && (d.resident || d.batched || d.type != ir::TensorType{DType::s32, Shape{}}))
      fail(
          "Trainer: step index input '{}' must be an s32 scalar, neither resident nor batched "
          "(it is {}{}{})",
          d.name, ir::to_string(d.type), d.resident ? ", resident" : "",
          d.batched ? ", batched" : "");
    if (!d.batched) continue;
    if (d.resident || d.type.shape.rank() == 0)
      fail("Trainer: input '{}' is marked batched but is {}", d.name,
           d.resident ? "resident" : "a scalar");
    std::vector<int64_t> dims = d.type.shape.dims;
    if (dims[0] % replicas)
      fail("Trainer: input '{}' holds a batch of {}, which does not split over {} processes",
           d.name, dims[0], replicas);
    dims[0] /= replicas;
    d.type.shape = Shape(dims);
  }
  lane_ = options_.lane == Lane::automatic ? choose_lane(Lane::automatic).lane : options_.lane;
  if (lane_ == Lane::pjrt && replicas > 1)
    fail(
        "Trainer: data parallelism over {} processes runs on the host lane (a multi-device pjrt "
        "run is not built): use --lane host",
        replicas);
  options_.update.flat_state =
      options_.flat_state.value_or(options_.update.flat_state || lane_ == Lane::pjrt);
  step_ = build_train_step(model_, loss, local_data_, opt_, options_.update, &forward_ops_,
                           &gradient_ops_, &input_updates_, options_.precision, &gradient_);
  auto buffers = model_.named_buffers();
  for (const auto& b : buffers) buffer_names_.push_back(b.name);
  auto named = model_.named_parameters();
  order_ = parameter_order(model_);
  const size_t nf = named.size() - size_t(step_.num_params);
  for (size_t k = 0; k < order_.size(); ++k)
    (k < nf ? frozen_names_ : param_names_).push_back(named[order_[k]].name);
  if (lane_ == Lane::pjrt)
    client_ = options_.client ? options_.client : &runtime::pjrt::default_client();
  else
    gradient_ = {};  // only the pjrt lane's cross_check reads it
  exe_ = compile(step_.fn);
  inputs_.resize(size_t(step_.fn.num_inputs()));

  // Resident inputs: data slots stay empty until set; buffers and frozen parameters (after the
  // data, never donated) and params from the model; fresh state.
  for (size_t i = 0; i < buffers.size(); ++i)
    put_input(int(data_.size() + i), buffers[i].buffer->value);
  put_step_indices();
  for (size_t k = 0; k < order_.size(); ++k)
    put_input(int(first_param() + k), named[order_[k]].param->value);
  auto state = optim::init_state(step_.state);
  for (int j = 0; j < step_.state.size(); ++j)
    put_input(step_.state_input(j), std::move(state[size_t(j)]));
}

Trainer::~Trainer() = default;

bool Trainer::splits_batches() const {
  return std::any_of(data_.begin(), data_.end(), [](const DataInput& d) { return d.batched; });
}

std::unique_ptr<runtime::Executable> Trainer::compile(const ir::Function& f) const {
  if (lane_ == Lane::pjrt) return runtime::pjrt::compile(f, *client_, options_.pjrt);
  runtime::host::Options ho;
  ho.num_threads = options_.num_threads;
  return runtime::host::compile(f, ho);
}

void Trainer::put_input(int index, Array value) {
  inputs_[size_t(index)] = exe_->upload(std::move(value));
}

void Trainer::set_resident(std::string_view name, Array value) {
  size_t i = 0;
  while (i < data_.size() && data_[i].name != name) ++i;
  if (i == data_.size() || !data_[i].resident) {
    std::vector<std::string> resident;
    for (const auto& d : data_)
      if (d.resident) resident.push_back(d.name);
    fail("Trainer::set_resident: '{}' is not a resident input (resident: {})", name,
         join_names(resident));
  }
  const auto& t = data_[i].type;
  if (value.raw() == nullptr || value.dtype() != t.dtype || value.shape() != t.shape)
    fail("Trainer::set_resident: '{}' is {} but the step takes {}", name,
         value.raw() == nullptr ? std::string("an empty array") : describe(value),
         ir::to_string(t));
  wait();  // the steps in flight read the old value; it is freed here
  put_input(int(i), std::move(value));
}

const char* Trainer::s32_step_counter() const {
  if (step_.has_schedule_step) return "the schedule in the program";
  for (const DataInput& d : data_)
    if (d.step_index) return "the program's step index";
  return nullptr;
}

void Trainer::put_step_indices() {
  if (step_.has_schedule_step)
    put_input(step_.schedule_step_input(), Array::scalar<int32_t>(int32_t(steps_taken_)));
  for (size_t i = 0; i < data_.size(); ++i)
    if (data_[i].step_index) put_input(int(i), Array::scalar<int32_t>(int32_t(steps_taken_)));
}

void Trainer::put_step_inputs(Batch& inputs) {
  std::vector<const DataInput*> per_step;
  std::vector<int> slots;
  for (size_t i = 0; i < data_.size(); ++i) {
    if (data_[i].step_index) continue;  // on the lane already, advanced by the program
    if (!data_[i].resident) {
      per_step.push_back(&data_[i]);
      slots.push_back(int(i));
    } else if (inputs_[i].empty()) {
      fail("Trainer::step: resident input '{}' was never set", data_[i].name);
    }
  }
  std::vector<size_t> at = match_inputs("Trainer::step", per_step, inputs, data_);
  for (size_t k = 0; k < at.size(); ++k) {
    Array& a = inputs[at[k]].second;
    const DataInput& local = local_data_[size_t(slots[k])];
    if (local.batched && local.type.shape != a.shape()) {  // this rank's rows
      const int64_t rows = local.type.shape[0];
      a = leading_rows(a, distributed::rank() * rows, rows);
    }
    put_input(slots[k], std::move(a));
  }
  // With the schedule in the program the lr inputs are the base lrs: they never change.
  auto lr = step_.group_lr(step_.has_schedule_step ? 1.0 : options_.schedule.factor(steps_taken_));
  auto scalars = step_.scalar_inputs(lr, options_.grad_scale);
  scalars_.resize(scalars.size(), std::nan(""));
  for (size_t j = 0; j < scalars.size(); ++j) {
    const int index = step_.lr_input(0) + int(j);
    const double v = scalars[j].at(0);  // NaN never equals: the first step always puts it
    if (v == scalars_[j] && !inputs_[size_t(index)].empty()) continue;
    scalars_[j] = v;
    put_input(index, std::move(scalars[j]));
  }
}

void Trainer::step(Batch inputs) {
  if (const char* what = s32_step_counter(); what && steps_taken_ > INT32_MAX)
    fail("Trainer::step: step {} is past the 2^31 - 1 steps {} counts", steps_taken_, what);
  queue_.make_room();  // refuses to go on after a failed step; keeps max_in_flight
  put_step_inputs(inputs);
  // Params and state are donated: their new values are written into the same storage (on pjrt
  // once the device gets there: the next step takes the outputs as they are).
  outputs_ = exe_->run(inputs_, true);
  for (int i = 0; i < step_.num_params; ++i)
    inputs_[size_t(step_.param_input(i))] = std::move(outputs_[size_t(step_.param_output(i))]);
  for (int j = 0; j < step_.state.size(); ++j)
    inputs_[size_t(step_.state_input(j))] = std::move(outputs_[size_t(step_.state_output(j))]);
  // Buffers a forward updated (BatchNorm's running statistics) and step indices: not donated,
  // replaced.
  for (size_t k = 0; k < input_updates_.size(); ++k)
    inputs_[input_updates_[k]] = std::move(outputs_[size_t(1 + user_aux()) + k]);
  if (step_.has_schedule_step)
    inputs_[size_t(step_.schedule_step_input())] =
        std::move(outputs_[size_t(step_.schedule_step_output())]);
  ++steps_taken_;
  last_found_inf_ =
      std::make_shared<runtime::Buffer>(std::move(outputs_[size_t(step_.found_inf_output())]));
  if (loss_scaling()) unread_skips_.emplace_back(steps_taken_, last_found_inf_);
  queue_.push(steps_taken_, outputs_[size_t(step_.loss_output())].done());
}

StepReport Trainer::read_last() const {
  if (outputs_.empty()) fail("Trainer::read_last: no step has run yet");
  wait();
  auto get = [&](int k) { return exe_->download(outputs_[size_t(k)]); };
  StepReport r;
  r.loss = get(step_.loss_output()).at(0);
  r.found_inf = exe_->download(*last_found_inf_).at(0) != 0;
  if (step_.has_grad_norm) r.grad_norm = get(step_.grad_norm_output()).at(0);
  for (int a = 0; a < user_aux(); ++a) r.aux.push_back(get(1 + a));
  return r;
}

double Trainer::loss_scale() const {
  const int j = step_.state.find(-1, optim::StateKind::loss_scale);
  if (j < 0) fail("Trainer::loss_scale: this step has no loss scaling");
  wait();
  return exe_->download(inputs_[size_t(step_.state_input(j))]).at(0);
}

bool Trainer::last_skipped() const {
  if (outputs_.empty()) fail("Trainer::last_skipped: no step has run yet");
  wait();
  return exe_->download(*last_found_inf_).at(0) != 0;
}

std::vector<std::pair<int64_t, bool>> Trainer::take_skips(bool finished_only) {
  size_t n = unread_skips_.size();
  if (finished_only)
    n -= std::min(n, queue_.size());  // the newest steps are the ones in flight
  else
    wait();
  std::vector<std::pair<int64_t, bool>> out;
  for (size_t i = 0; i < n; ++i) {
    auto& [step, flag] = unread_skips_.front();
    out.emplace_back(step, exe_->download(*flag).at(0) != 0);
    unread_skips_.pop_front();
  }
  return out;
}

int64_t Trainer::optimizer_step() const {
  wait();
  return int64_t(
      exe_->download(inputs_[size_t(step_.state_input(step_.state.step_index()))]).at(0));
}

double Trainer::current_lr() const { return lr_at(steps_taken_); }

double Trainer::lr_at(int64_t step) const {
  return step_.group_lr(options_.schedule.factor(step))[0];
}

void Trainer::sync_to_model() {
  wait();
  auto named = model_.named_parameters();
  const size_t nf = frozen_names_.size();
  for (size_t i = 0; i < param_names_.size(); ++i)
    named[order_[nf + i]].param->value = exe_->download(inputs_[size_t(step_.param_input(int(i)))]);
  auto buffers = model_.named_buffers();
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].buffer->value = exe_->download(inputs_[data_.size() + i]);
}

std::vector<std::pair<std::string, Array>> Trainer::named_buffers() const {
  wait();
  std::vector<std::pair<std::string, Array>> out;
  for (size_t i = 0; i < buffer_names_.size(); ++i)
    out.emplace_back(buffer_names_[i], exe_->download(inputs_[data_.size() + i]));
  return out;
}

std::vector<std::pair<std::string, ir::TensorType>> Trainer::buffer_specs() const {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  for (size_t i = 0; i < buffer_names_.size(); ++i)
    out.emplace_back(buffer_names_[i], step_.fn.input_type(int(data_.size() + i)));
  return out;
}

void Trainer::load_buffers(std::vector<Array> buffers) {
  wait();
  auto want = buffer_specs();
  std::string problems;
  if (buffers.size() != want.size())
    problems = fmt::format("\n  {} arrays for {} buffers", buffers.size(), want.size());
  for (size_t i = 0; problems.empty() && i < buffers.size(); ++i)
    if (buffers[i].dtype() != want[i].second.dtype || buffers[i].shape() != want[i].second.shape)
      problems += fmt::format("\n  '{}' is {}, expected {}", want[i].first, describe(buffers[i]),
                              ir::to_string(want[i].second));
  if (!problems.empty()) fail("Trainer::load_buffers:{}", problems);
  for (size_t i = 0; i < buffers.size(); ++i)
    put_input(int(data_.size() + i), std::move(buffers[i]));
}

std::vector<std::pair<std::string, Array>> Trainer::frozen_parameters() const {
  wait();
  std::vector<std::pair<std::string, Array>> out;
  for (size_t k = 0; k < frozen_names_.size(); ++k)
    out.emplace_back(frozen_names_[k], exe_->download(inputs_[first_param() + k]));
  return out;
}

std::vector<std::pair<std::string, Array>> Trainer::named_parameters() const {
  wait();
  std::vector<std::pair<std::string, Array>> out;
  for (size_t i = 0; i < param_names_.size(); ++i)
    out.emplace_back(param_names_[i], exe_->download(inputs_[size_t(step_.param_input(int(i)))]));
  return out;
}

const optim::StateLayout& Trainer::full_state_layout() const { return step_.full_state(); }

std::string Trainer::state_name(int j) const {
  const auto& slot = full_state_layout().slots[size_t(j)];
  if (slot.kind == optim::StateKind::step) return "optimizer.step";
  if (slot.param < 0) return fmt::format("scaler.{}", optim::name(slot.kind));  // GradScaler's
  return fmt::format("optimizer.{}.{}", param_names_[size_t(slot.param)], optim::name(slot.kind));
}

std::vector<std::pair<std::string, Array>> Trainer::optimizer_state() const {
  wait();
  auto slot = [&](int j) { return exe_->download(inputs_[size_t(step_.state_input(j))]); };
  std::vector<Array> local;
  if (step_.zero)  // every rank's shard gathered (a collective: every rank calls it)
    local = optim::gather_state(*step_.zero, step_.state, slot);
  else if (step_.flat)  // the buckets cut into their parameters
    local = optim::whole_state(*step_.flat, step_.state, slot);
  else
    for (int j = 0; j < step_.state.size(); ++j) local.push_back(slot(j));
  std::vector<std::pair<std::string, Array>> out;
  for (size_t j = 0; j < local.size(); ++j)
    out.emplace_back(state_name(int(j)), std::move(local[j]));
  return out;
}

std::vector<int64_t> Trainer::state_elements_per_rank() const {
  std::vector<double> n(size_t(distributed::world_size()), 0);  // exact below 2^53
  for (const auto& s : step_.state.slots)
    if (s.param >= 0 || s.bucket >= 0)
      n[size_t(distributed::rank())] += double(s.type.shape.numel());
  if (n.size() > 1)
    distributed::world().all_reduce(n.data(), int64_t(n.size()), DType::f64,
                                    distributed::Reduction::sum);
  return std::vector<int64_t>(n.begin(), n.end());
}

std::vector<std::pair<std::string, ir::TensorType>> Trainer::parameter_specs() const {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  for (size_t i = 0; i < param_names_.size(); ++i)
    out.emplace_back(param_names_[i], step_.fn.input_type(step_.param_input(int(i))));
  return out;
}

std::vector<std::pair<std::string, ir::TensorType>> Trainer::state_specs() const {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  const optim::StateLayout& full = full_state_layout();
  for (int j = 0; j < full.size(); ++j) out.emplace_back(state_name(j), full.slots[size_t(j)].type);
  return out;
}

void Trainer::load_state(std::vector<Array> params, std::vector<Array> state, int64_t steps_taken) {
  wait();  // a failure in flight is reported, not covered over
  std::string problems;
  auto check = [&](const std::vector<Array>& got,
                   const std::vector<std::pair<std::string, ir::TensorType>>& want) {
    if (got.size() != want.size()) {
      problems += fmt::format("\n  {} arrays for {} expected", got.size(), want.size());
      return;
    }
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i].dtype() != want[i].second.dtype || got[i].shape() != want[i].second.shape)
        problems += fmt::format("\n  '{}' is {}, expected {}", want[i].first, describe(got[i]),
                                ir::to_string(want[i].second));
  };
  check(params, parameter_specs());
  check(state, state_specs());
  if (!problems.empty()) fail("Trainer::load_state:{}", problems);
  if (steps_taken < 0) fail("Trainer::load_state: negative step count {}", steps_taken);
  if (const char* what = s32_step_counter(); what && steps_taken > INT32_MAX)
    fail("Trainer::load_state: step count {} is past the 2^31 - 1 steps {} counts", steps_taken,
         what);
  for (size_t i = 0; i < params.size(); ++i)
    put_input(step_.param_input(int(i)), std::move(params[i]));
  if (step_.zero) state = optim::shard_state(*step_.zero, step_.state, state);  // this rank's
  if (step_.flat) state = optim::flat_state_of(*step_.flat, step_.state, state);
  for (size_t j = 0; j < state.size(); ++j)
    put_input(step_.state_input(int(j)), std::move(state[j]));
  steps_taken_ = steps_taken;
  put_step_indices();
  outputs_.clear();
  last_found_inf_.reset();
  unread_skips_.clear();
}

int Trainer::add_eval(LossFn fn, std::vector<DataInput> data) {
  for (const DataInput& d : data)
    if (d.step_index)
      fail(
          "Trainer::add_eval: input '{}' is a step index, which only the train step takes "
          "(an evaluation is given all its inputs)",
          d.name);
  ir::Function f = capture_model(model_, fn, data, "eval", options_.precision);
  evals_.push_back({compile(f), std::move(data)});
  return int(evals_.size()) - 1;
}

std::vector<Array> Trainer::run_eval(int id, Batch& data) {
  if (id < 0 || size_t(id) >= evals_.size()) fail("Trainer::run_eval: no evaluation {}", id);
  wait();  // the parameters it borrows are those of the last step
  Eval& e = evals_[size_t(id)];
  std::vector<const DataInput*> want;
  for (const auto& d : e.data) want.push_back(&d);
  std::vector<size_t> at = match_inputs("Trainer::run_eval", want, data, {});
  // The data goes as host buffers (lent; the pjrt lane copies it in), the resident parameter
  // buffers are lent too: neither is donated, both are taken back.
  std::vector<runtime::Buffer> args;
  for (size_t k : at) args.emplace_back(std::move(data[k].second));
  // Buffers, frozen, then trained parameters.
  const size_t nd = args.size(), np = buffer_names_.size() + order_.size();
  for (size_t i = 0; i < np; ++i) args.push_back(std::move(inputs_[data_.size() + i]));
  auto give_back = [&] {
    for (size_t i = 0; i < np; ++i) inputs_[data_.size() + i] = std::move(args[nd + i]);
    for (size_t k = 0; k < nd; ++k)
      if (args[k].on_host()) data[at[k]].second = args[k].take_array();
  };
  std::vector<runtime::Buffer> out;
  try {
    out = e.exe->run(args, false);
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
  std::vector<Array> res;
  for (auto& b : out) res.push_back(e.exe->download(std::move(b)));
  return res;
}

}  // namespace tlaloc::train
