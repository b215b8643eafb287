#include "tlaloc/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/runtime/host/compile.h"

namespace tlaloc::train {

namespace {

// Captures (data..., params...) -> loss outputs of `fn` applied to `model`.
ir::Function capture_model(nn::Module& model, const LossFn& fn,
                           const std::vector<ir::TensorType>& data_types,
                           const std::vector<std::string>& data_names, const char* name) {
  auto named = model.named_parameters();
  std::vector<ir::TensorType> types = data_types;
  std::vector<std::string> names = data_names;
  for (auto& p : named) {
    types.push_back({p.param->value.dtype(), p.param->value.shape()});
    names.push_back(p.name);
  }
  size_t nd = data_types.size();
  ir::Function f = trace::capture(
      [&](std::span<const trace::Tensor> in) {
        model.bind(in.subspan(nd));
        auto outs = fn(model, in.subspan(0, nd));
        if (outs.empty()) fail("{}: the loss function returned no outputs", name);
        return outs;
      },
      types, names, {}, name);
  // Unbind so a stale capture is never used.
  for (auto& p : named) p.param->bound = {};
  return passes::simplify(f);
}

}  // namespace

ir::Function build_gradient(nn::Module& model, const LossFn& loss,
                            const std::vector<DataInput>& data, int64_t* forward_ops) {
  std::vector<ir::TensorType> data_types;
  std::vector<std::string> data_names;
  for (auto& d : data) {
    data_types.push_back(d.type);
    data_names.push_back(d.name);
  }
  ir::Function fwd = capture_model(model, loss, data_types, data_names, "forward");
  const ir::TensorType& lt = fwd.output_type(0);
  if (lt.shape.rank() != 0 || !is_floating(lt.dtype))
    fail("train step: the loss must be a floating scalar, got {}", ir::to_string(lt));
  if (forward_ops) *forward_ops = fwd.num_ops();
  int num_params = int(model.named_parameters().size());
  std::vector<int> wrt;
  for (int i = 0; i < num_params; ++i) wrt.push_back(int(data.size()) + i);
  return passes::simplify(autodiff::value_and_grad(fwd, wrt));
}

optim::TrainStep build_train_step(nn::Module& model, const LossFn& loss,
                                  const std::vector<DataInput>& data, const optim::Optimizer& opt,
                                  const optim::UpdateOptions& update, int64_t* forward_ops,
                                  int64_t* gradient_ops) {
  optim::validate(opt);
  ir::Function grad = build_gradient(model, loss, data, forward_ops);
  if (gradient_ops) *gradient_ops = grad.num_ops();
  int num_params = int(model.named_parameters().size());
  optim::TrainStep step = optim::append_update(opt, grad, num_params, update);
  step.fn = passes::simplify(step.fn);
  return step;
}

Trainer::Trainer(nn::Module& model, LossFn loss, std::vector<DataInput> data, optim::Optimizer opt,
                 TrainerOptions options)
    : model_(model), opt_(std::move(opt)), options_(std::move(options)), data_(std::move(data)) {
  options_.schedule.check();
  step_ =
      build_train_step(model_, loss, data_, opt_, options_.update, &forward_ops_, &gradient_ops_);
  auto named = model_.named_parameters();
  for (auto& p : named) param_names_.push_back(p.name);
  lane_ = options_.lane == Lane::automatic ? choose_lane(Lane::automatic).lane : options_.lane;
  if (lane_ == Lane::pjrt) {
    client_ = options_.client ? options_.client : &runtime::pjrt::default_client();
    dexe_ = runtime::pjrt::compile(step_.fn, *client_, options_.pjrt);
    dinputs_.resize(size_t(step_.fn.num_inputs()));
  } else {
    runtime::host::Options ho;
    ho.num_threads = options_.num_threads;
    exe_ = runtime::host::compile(step_.fn, ho);
    inputs_.resize(size_t(step_.fn.num_inputs()));
  }

  // Resident inputs: data slots stay empty until set; params from the model; fresh state.
  for (size_t i = 0; i < named.size(); ++i)
    put_input(step_.param_input(int(i)), named[i].param->value);
  auto state = optim::init_state(step_.state);
  for (int j = 0; j < step_.state.size(); ++j)
    put_input(step_.state_input(j), std::move(state[size_t(j)]));
}

Array Trainer::fetch_input(int index) const {
  if (lane_ == Lane::pjrt) return client_->to_host(dinputs_[size_t(index)]);
  return inputs_[size_t(index)];
}

void Trainer::put_input(int index, Array value) {
  if (lane_ == Lane::pjrt)
    dinputs_[size_t(index)] = client_->to_device(value);
  else
    inputs_[size_t(index)] = std::move(value);
}

Trainer::~Trainer() = default;

void Trainer::set_resident(int index, Array value) {
  if (index < 0 || size_t(index) >= data_.size() || !data_[size_t(index)].resident)
    fail("Trainer::set_resident: data input {} is not a resident input", index);
  const auto& t = data_[size_t(index)].type;
  if (value.dtype() != t.dtype || value.shape() != t.shape)
    fail("Trainer::set_resident: '{}' is {} but the step takes {}", data_[size_t(index)].name,
         describe(value), ir::to_string(t));
  put_input(index, std::move(value));
}

void Trainer::set_step_inputs(std::vector<Array>& inputs) {
  size_t k = 0;
  for (size_t i = 0; i < data_.size(); ++i) {
    if (data_[i].resident) {
      if (lane_ == Lane::pjrt ? dinputs_[i].empty() : inputs_[i].empty())
        fail("Trainer::step: resident input '{}' was never set", data_[i].name);
      continue;
    }
    if (k >= inputs.size())
      fail("Trainer::step: got {} per-step inputs, the step needs more ('{}')", inputs.size(),
           data_[i].name);
    put_input(int(i), std::move(inputs[k++]));
  }
  if (k != inputs.size())
    fail("Trainer::step: got {} per-step inputs, the step takes {}", inputs.size(), k);
  auto lr = step_.group_lr(options_.schedule.factor(steps_taken_));
  auto scalars = step_.scalar_inputs(lr, options_.grad_scale);
  if (lane_ == Lane::pjrt) dscalars_.resize(scalars.size(), std::nan(""));
  for (size_t j = 0; j < scalars.size(); ++j) {
    const int index = step_.lr_input(0) + int(j);
    if (lane_ == Lane::pjrt) {
      const double v = scalars[j].at(0);  // NaN never equals: a first upload always happens
      if (v == dscalars_[j] && !dinputs_[size_t(index)].empty()) continue;
      dscalars_[j] = v;
    }
    put_input(index, std::move(scalars[j]));
  }
}

void Trainer::step(std::vector<Array> inputs) {
  set_step_inputs(inputs);
  if (lane_ == Lane::pjrt) {
    // Params and state are donated: XLA writes their new values into the same device memory.
    std::vector<runtime::pjrt::Buffer> out = dexe_->run_buffers(dinputs_, true);
    for (int i = 0; i < step_.num_params; ++i)
      dinputs_[size_t(step_.param_input(i))] = std::move(out[size_t(step_.param_output(i))]);
    for (int j = 0; j < step_.state.size(); ++j)
      dinputs_[size_t(step_.state_input(j))] = std::move(out[size_t(step_.state_output(j))]);
    doutputs_ = std::move(out);
    ++steps_taken_;
    return;
  }
  outputs_ = exe_->run_donated(inputs_);
  for (int i = 0; i < step_.num_params; ++i)
    inputs_[size_t(step_.param_input(i))] = std::move(outputs_[size_t(step_.param_output(i))]);
  for (int j = 0; j < step_.state.size(); ++j)
    inputs_[size_t(step_.state_input(j))] = std::move(outputs_[size_t(step_.state_output(j))]);
  ++steps_taken_;
}

StepReport Trainer::read_last() const {
  if (lane_ == Lane::pjrt) {
    if (doutputs_.empty()) fail("Trainer::read_last: no step has run yet");
    auto get = [&](int k) { return client_->to_host(doutputs_[size_t(k)]); };
    StepReport r;
    r.loss = get(step_.loss_output()).at(0);
    r.found_inf = get(step_.found_inf_output()).at(0) != 0;
    if (step_.has_grad_norm) r.grad_norm = get(step_.grad_norm_output()).at(0);
    for (int a = 0; a < step_.num_aux; ++a) r.aux.push_back(get(1 + a));
    return r;
  }
  if (outputs_.empty()) fail("Trainer::read_last: no step has run yet");
  StepReport r;
  r.loss = outputs_[size_t(step_.loss_output())].at(0);
  r.found_inf = outputs_[size_t(step_.found_inf_output())].at(0) != 0;
  if (step_.has_grad_norm) r.grad_norm = outputs_[size_t(step_.grad_norm_output())].at(0);
  for (int a = 0; a < step_.num_aux; ++a) r.aux.push_back(outputs_[size_t(1 + a)]);
  return r;
}

int64_t Trainer::optimizer_step() const {
  return int64_t(fetch_input(step_.state_input(step_.state.step_index())).at(0));
}

double Trainer::current_lr() const {
  return step_.group_lr(options_.schedule.factor(steps_taken_))[0];
}

void Trainer::sync_to_model() {
  auto named = model_.named_parameters();
  for (size_t i = 0; i < named.size(); ++i)
    named[i].param->value = fetch_input(step_.param_input(int(i)));
}

std::vector<std::pair<std::string, Array>> Trainer::named_parameters() const {
  std::vector<std::pair<std::string, Array>> out;
  for (size_t i = 0; i < param_names_.size(); ++i)
    out.emplace_back(param_names_[i], fetch_input(step_.param_input(int(i))));
  return out;
}

std::string Trainer::state_name(int j) const {
  const auto& slot = step_.state.slots[size_t(j)];
  if (slot.param < 0) return "optimizer.step";
  return fmt::format("optimizer.{}.{}", param_names_[size_t(slot.param)], optim::name(slot.kind));
}

std::vector<std::pair<std::string, Array>> Trainer::optimizer_state() const {
  std::vector<std::pair<std::string, Array>> out;
  for (int j = 0; j < step_.state.size(); ++j) {
    std::string nm = state_name(j);
    out.emplace_back(nm, fetch_input(step_.state_input(j)));
  }
  return out;
}

std::vector<std::pair<std::string, ir::TensorType>> Trainer::parameter_specs() const {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  for (size_t i = 0; i < param_names_.size(); ++i)
    out.emplace_back(param_names_[i], step_.fn.input_type(step_.param_input(int(i))));
  return out;
}

std::vector<std::pair<std::string, ir::TensorType>> Trainer::state_specs() const {
  std::vector<std::pair<std::string, ir::TensorType>> out;
  for (int j = 0; j < step_.state.size(); ++j) {
    std::string nm = state_name(j);
    out.emplace_back(nm, step_.fn.input_type(step_.state_input(j)));
  }
  return out;
}

void Trainer::load_state(std::vector<Array> params, std::vector<Array> state, int64_t steps_taken) {
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
  for (size_t i = 0; i < params.size(); ++i)
    put_input(step_.param_input(int(i)), std::move(params[i]));
  for (size_t j = 0; j < state.size(); ++j)
    put_input(step_.state_input(int(j)), std::move(state[j]));
  steps_taken_ = steps_taken;
  outputs_.clear();
  doutputs_.clear();
}

int Trainer::add_eval(LossFn fn, std::vector<ir::TensorType> data_types) {
  std::vector<std::string> names;
  for (size_t i = 0; i < data_types.size(); ++i) names.push_back(fmt::format("data{}", i));
  ir::Function f = capture_model(model_, fn, data_types, names, "eval");
  if (lane_ == Lane::pjrt) {
    devals_.push_back(runtime::pjrt::compile(f, *client_, options_.pjrt));
    return int(devals_.size()) - 1;
  }
  runtime::host::Options ho;
  ho.num_threads = options_.num_threads;
  evals_.push_back(runtime::host::compile(f, ho));
  return int(evals_.size()) - 1;
}

std::vector<Array> Trainer::run_eval(int id, std::vector<Array>& data) {
  if (lane_ == Lane::pjrt) {
    if (id < 0 || size_t(id) >= devals_.size()) fail("Trainer::run_eval: no evaluation {}", id);
    // Data is uploaded; the resident parameter buffers are lent (not donated) and taken back.
    std::vector<runtime::pjrt::Buffer> args;
    for (const Array& a : data) args.push_back(client_->to_device(a));
    size_t nd = args.size();
    for (size_t i = 0; i < param_names_.size(); ++i)
      args.push_back(std::move(dinputs_[size_t(step_.param_input(int(i)))]));
    auto give_back = [&] {
      for (size_t i = 0; i < param_names_.size(); ++i)
        dinputs_[size_t(step_.param_input(int(i)))] = std::move(args[nd + i]);
    };
    std::vector<runtime::pjrt::Buffer> out;
    try {
      out = devals_[size_t(id)]->run_buffers(args, false);
    } catch (...) {
      give_back();
      throw;
    }
    give_back();
    std::vector<Array> res;
    for (const auto& b : out) res.push_back(client_->to_host(b));
    return res;
  }
  if (id < 0 || size_t(id) >= evals_.size()) fail("Trainer::run_eval: no evaluation {}", id);
  size_t nd = data.size();
  std::vector<Array> in = std::move(data);
  for (size_t i = 0; i < param_names_.size(); ++i)
    in.push_back(std::move(inputs_[size_t(step_.param_input(int(i)))]));
  auto give_back = [&] {
    for (size_t i = 0; i < param_names_.size(); ++i)
      inputs_[size_t(step_.param_input(int(i)))] = std::move(in[nd + i]);
    in.resize(nd);
    data = std::move(in);
  };
  std::vector<Array> out;
  try {
    out = evals_[size_t(id)]->run(in);
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
  return out;
}

CrossCheck Trainer::cross_check(std::vector<Array> inputs) {
  if (lane_ != Lane::pjrt) fail("Trainer::cross_check: the trainer runs on the host lane");
  std::vector<Array> per_step = inputs;  // host copies of the per-step data
  set_step_inputs(inputs);               // uploads per-step data and scalars
  // Host inputs: per-step data from the caller, everything else read back from the device.
  std::vector<Array> host_in(size_t(step_.fn.num_inputs()));
  size_t k = 0;
  for (int i = 0; i < step_.fn.num_inputs(); ++i)
    host_in[size_t(i)] = (size_t(i) < data_.size() && !data_[size_t(i)].resident)
                             ? std::move(per_step[k++])
                             : fetch_input(i);
  runtime::host::Options ho;
  ho.num_threads = options_.num_threads;
  std::vector<Array> want = runtime::host::compile(step_.fn, ho)->run(host_in);
  std::vector<runtime::pjrt::Buffer> got = dexe_->run_buffers(dinputs_, false);  // no donation
  CrossCheck c;
  c.max_rel = -1;
  for (size_t o = 0; o < want.size(); ++o) {
    Array g = client_->to_host(got[o]);
    double diff = 0, scale = 0;
    for (int64_t e = 0; e < g.numel(); ++e) {
      double h = want[o].at(e), d = g.at(e);
      double ad = std::isnan(h) && std::isnan(d) ? 0 : std::fabs(d - h);
      if (std::isnan(ad)) ad = INFINITY;
      diff = std::max(diff, ad);
      scale = std::max(scale, std::fabs(h));
    }
    double rel = diff / std::max(scale, 1e-30);
    c.max_abs = std::max(c.max_abs, diff);
    if (rel > c.max_rel) {
      c.max_rel = rel;
      c.worst = step_.fn.output_names.size() > o && !step_.fn.output_names[o].empty()
                    ? step_.fn.output_names[o]
                    : fmt::format("output {}", o);
    }
  }
  if (c.max_rel < 0) c.max_rel = 0;
  return c;
}

}  // namespace tlaloc::train
