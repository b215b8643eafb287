#include "tlaloc/train/cross_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/runtime/host/compile.h"

namespace tlaloc::train {

namespace {

constexpr double kTiny = std::numeric_limits<float>::min();  // the zero-norm floor

// Element i of an array as f64; f32 (the common case) read without Array::at's dtype switch.
struct Values {
  explicit Values(const Array& a)
      : a(a), f32(a.dtype() == DType::f32 ? a.data<float>() : nullptr) {}
  double operator()(int64_t i) const { return f32 ? double(f32[i]) : a.at(i); }
  const Array& a;
  const float* f32;
};

// ‖v‖₂ of n values v(i), accumulated in f64 after scaling by the largest |v(i)|, so neither
// overflow nor underflow of the squares changes it. Only finite values are passed in.
template <class F>
double l2(int64_t n, F v) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v(i)));
  if (m == 0) return 0;
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = v(i) / m;
    s += x * x;
  }
  return m * std::sqrt(s);
}

// "NaN" / "inf" / "" for the first non-finite value of a.
std::string non_finite(const Array& a) {
  bool inf = false;
  const Values v(a);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = v(i);
    if (std::isnan(x)) return "NaN";
    inf |= std::isinf(x);
  }
  return inf ? "inf" : "";
}

void check_shapes(const std::string& name, const Array& device, const Array& host) {
  if (device.shape() != host.shape())
    fail("cross-check: '{}' is {} on the device but {} on the host", name, describe(device),
         describe(host));
}

// Integer / i1 tensors: equal or a problem naming the values (scalars) or the count that differ.
bool exact(TensorScore& s, const Array& device, const Array& host) {
  if (is_floating(device.dtype()) && is_floating(host.dtype())) return false;
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < host.numel(); ++i)
    if (device.at(i) != host.at(i) && differ++ == 0) first = i;
  if (differ == 0) return true;
  s.score = INFINITY;
  s.problem = host.numel() == 1
                  ? fmt::format("differs (device {}, host {})", device.at(first), host.at(first))
                  : fmt::format("{} of {} elements differ", differ, host.numel());
  return true;
}

// NaN / inf on either side: a problem naming them, score +inf.
bool non_finite_problem(TensorScore& s, const Array& device, const Array& host) {
  const std::string d = non_finite(device), h = non_finite(host);
  if (d.empty() && h.empty()) return false;
  s.score = INFINITY;
  if (!d.empty()) s.problem = d + " on the device";
  if (!h.empty()) s.problem += (s.problem.empty() ? "" : ", ") + h + " on the host";
  return true;
}

}  // namespace

CrossCheckMode parse_cross_check_mode(std::string_view s) {
  if (s == "off") return CrossCheckMode::off;
  if (s == "warn") return CrossCheckMode::warn;
  if (s == "require") return CrossCheckMode::require;
  fail("--cross-check '{}': use off, warn or require", s);
}

CrossCheckThresholds cross_check_thresholds(stablehlo::Precision p) {
  if (p == stablehlo::Precision::HIGHEST) return {.loss = 1e-5, .gradient = 1e-5, .update = 1e-2};
  return {};
}

TensorScore relative_l2(std::string name, const Array& device, const Array& host) {
  check_shapes(name, device, host);
  TensorScore s;
  s.name = std::move(name);
  if (exact(s, device, host) || non_finite_problem(s, device, host)) return s;
  const Values d(device), h(host);
  s.diff_norm = l2(host.numel(), [&](int64_t i) { return d(i) - h(i); });
  s.ref_norm = l2(host.numel(), h);
  s.score = s.diff_norm / std::max(s.ref_norm, kTiny);
  return s;
}

TensorScore relative_change(std::string name, const Array& device, const Array& host,
                            const Array& before) {
  check_shapes(name, device, host);
  check_shapes(name, before, host);
  TensorScore s;
  s.name = std::move(name);
  if (exact(s, device, host) || non_finite_problem(s, device, host)) return s;
  const Values d(device), h(host), b(before);
  s.diff_norm = l2(host.numel(), [&](int64_t i) { return d(i) - h(i); });
  s.ref_norm = l2(host.numel(), [&](int64_t i) {
    const double c = h(i) - b(i);
    return std::isfinite(c) ? c : 0.0;  // a non-finite `before` is the same on both sides
  });
  s.score = s.diff_norm / std::max(s.ref_norm, kTiny);
  return s;
}

namespace {

const TensorScore& worst(const std::vector<TensorScore>& v) {
  static const TensorScore none = [] {
    TensorScore s;
    s.name = "none";
    return s;
  }();
  const TensorScore* w = &none;
  for (const TensorScore& s : v)
    if (w == &none || s.score > w->score) w = &s;
  return *w;
}

// "2.0e-04 at NAME (<= 1e-02)", "5.0e-02 at NAME (> 1e-02) FAILED" or
// "inf at NAME (NaN on the device) FAILED".
std::string part(const TensorScore& s, double threshold, bool named) {
  std::string where = named ? fmt::format(" at {}", s.name) : "";
  if (!s.problem.empty()) return fmt::format("{:.1e}{} ({}) FAILED", s.score, where, s.problem);
  return fmt::format("{:.1e}{} ({} {:.0e}){}", s.score, where, s.passed(threshold) ? "<=" : ">",
                     threshold, s.passed(threshold) ? "" : " FAILED");
}

}  // namespace

const TensorScore& CrossCheckReport::worst_gradient() const { return worst(gradients); }
const TensorScore& CrossCheckReport::worst_update() const { return worst(update); }

std::string CrossCheckReport::summary() const {
  return fmt::format(
      "cross-check vs host lane {}: loss rel {}, gradients max rel L2 {}, update max rel L2 {}",
      passed() ? "passed" : "FAILED", part(loss, thresholds.loss, false),
      part(worst_gradient(), thresholds.gradient, true),
      part(worst_update(), thresholds.update, true));
}

// The Trainer's insides the check reads (Trainer befriends it).
struct CrossCheckAccess {
  static CrossCheckReport run(Trainer& t, Batch inputs);
};

namespace {

using runtime::Buffer;

// The gradient program on the step's own inputs: (data, buffers, frozen, params (master), state,
// lr..., grad_scale) -> (loss, grads...). `g` is the step's build_gradient program; with loss
// scaling its seed input is fed from the state slot `scale_slot` (else -1).
ir::Function gradient_on_step_inputs(const optim::TrainStep& step, const ir::Function& g,
                                     int scale_slot) {
  ir::Builder b("cross_check_gradient");
  std::vector<ir::ValueId> in;
  for (int k = 0; k < step.fn.num_inputs(); ++k)
    in.push_back(b.parameter(step.fn.input_type(k), step.fn.input_names.size() > size_t(k)
                                                        ? step.fn.input_names[size_t(k)]
                                                        : ""));
  const int n = step.num_params, g_other = g.num_inputs() - n;
  std::vector<ir::ValueId> args;
  for (int k = 0; k < g.num_inputs(); ++k) {
    ir::ValueId v;
    if (k >= g_other) {  // a parameter: its master, converted to the type G takes
      v = in[size_t(step.param_input(k - g_other))];
      if (b.type(v).dtype != g.input_type(k).dtype) v = b.convert(v, g.input_type(k).dtype);
    } else if (scale_slot >= 0 && k == g_other - 1) {  // the loss seed
      v = in[size_t(step.state_input(scale_slot))];
    } else {
      v = in[size_t(k)];
    }
    if (b.type(v) != g.input_type(k))
      fail("cross-check: the gradient program's input {} is {}, the step's {}", k,
           ir::to_string(g.input_type(k)), ir::to_string(b.type(v)));
    args.push_back(v);
  }
  const std::vector<ir::ValueId> out = passes::inline_function(b, g, args);
  std::vector<ir::ValueId> results{out[0]};
  std::vector<std::string> names{"loss"};
  for (int i = 0; i < n; ++i) {
    results.push_back(out[size_t(1 + step.num_aux + i)]);
    names.push_back(step.fn.input_names[size_t(step.param_input(i))]);
  }
  return passes::simplify(b.build(std::move(results), std::move(names)));
}

// The update alone: append_update on (loss, grads..., [scale], params...) -> (loss, grads...),
// so its inputs are (loss, grads..., params, state, lr..., grad_scale), nothing donated.
optim::TrainStep update_only(const optim::Optimizer& opt, const optim::TrainStep& step,
                             const ir::Function& g, const optim::UpdateOptions& options) {
  const int n = step.num_params, g_other = g.num_inputs() - n;
  ir::Builder b("cross_check_update");
  std::vector<ir::ValueId> results{b.parameter(g.output_type(0), "loss")};
  for (int i = 0; i < n; ++i)
    results.push_back(b.parameter(g.output_type(1 + step.num_aux + i),
                                  "grad." + g.input_names[size_t(g_other + i)]));
  if (options.loss_scaling) b.parameter({DType::f32, Shape{}}, "loss_scale");
  for (int i = 0; i < n; ++i)
    b.parameter(g.input_type(g_other + i), g.input_names[size_t(g_other + i)]);
  std::vector<std::string> names{"loss"};
  for (int i = 0; i < n; ++i) names.push_back("grad");
  optim::TrainStep u = optim::append_update(opt, b.build(results, names), n, options);
  u.fn.aliases.clear();  // lent, never donated
  u.fn = passes::simplify(u.fn);
  u.fn.name = "cross_check_update";
  if (u.state.slots.size() != step.state.slots.size() || u.groups.size() != step.groups.size())
    fail("cross-check: the update program's state or groups differ from the step's");
  for (size_t j = 0; j < u.state.slots.size(); ++j)
    if (u.state.slots[j].name != step.state.slots[j].name ||
        u.state.slots[j].type != step.state.slots[j].type)
      fail("cross-check: the update program's state slot {} differs from the step's", j);
  return u;
}

// Runs `exe` on `head` followed by lane.inputs [from, end), which are lent (moved in, moved back
// even when the run throws; never donated), and downloads every output.
std::vector<Array> run_lent(runtime::Executable& exe, std::vector<Buffer> head,
                            std::vector<Buffer>& lane_inputs, size_t from) {
  std::vector<Buffer> args = std::move(head);
  const size_t nh = args.size();
  for (size_t i = from; i < lane_inputs.size(); ++i) args.push_back(std::move(lane_inputs[i]));
  auto give_back = [&] {
    for (size_t i = from; i < lane_inputs.size(); ++i)
      lane_inputs[i] = std::move(args[nh + i - from]);
  };
  std::vector<Buffer> out;
  try {
    out = exe.run(args, false);
  } catch (...) {
    give_back();
    throw;
  }
  give_back();
  std::vector<Array> res;
  for (Buffer& o : out) res.push_back(exe.download(std::move(o)));
  return res;
}

}  // namespace

CrossCheckReport CrossCheckAccess::run(Trainer& t, Batch inputs) {
  if (t.lane_ != Lane::pjrt) fail("cross-check: the trainer runs on the host lane");
  const optim::TrainStep& step = t.step_;
  const int n = step.num_params;
  const int scale_slot = step.state.find(-1, optim::StateKind::loss_scale);
  optim::UpdateOptions uo = t.options_.update;  // as build_train_step: f16 scales the loss
  if (t.options_.precision == DType::f16 && !uo.loss_scaling) uo.loss_scaling.emplace();
  if ((scale_slot >= 0) != uo.loss_scaling.has_value())
    fail("cross-check: the step's loss scaling differs from its options");
  const ir::Function grad = gradient_on_step_inputs(step, t.gradient_, scale_slot);
  const optim::TrainStep upd = update_only(t.opt_, step, t.gradient_, uo);
  runtime::host::Options ho;
  ho.num_threads = t.options_.num_threads;

  t.set_step_inputs(inputs);  // per-step data and scalars onto the device, as step() would
  std::vector<Array> host_in;
  for (const Buffer& b : t.inputs_) host_in.push_back(t.exe_->download(b));

  CrossCheckReport r;
  r.thresholds = cross_check_thresholds(t.options_.pjrt.emit.precision);
  // 1. Loss and gradients.
  std::vector<Array> hg = runtime::host::compile(grad, ho)->run(host_in);
  auto dev_grad = t.compile(grad);
  std::vector<Array> dg = run_lent(*dev_grad, {}, t.inputs_, 0);
  r.loss = relative_l2("loss", dg[0], hg[0]);
  for (int i = 0; i < n; ++i)
    r.gradients.push_back(
        relative_l2(t.param_names_[size_t(i)], dg[size_t(1 + i)], hg[size_t(1 + i)]));

  // 2. The update alone, fed the host lane's loss and gradients on both lanes.
  const size_t from = size_t(step.param_input(0));  // params, state, lr..., grad_scale
  std::vector<Array> hu_in = hg;
  for (size_t k = from; k < host_in.size(); ++k) hu_in.push_back(host_in[k]);
  std::vector<Array> hu = runtime::host::compile(upd.fn, ho)->run(hu_in);
  auto dev_upd = t.compile(upd.fn);
  std::vector<Buffer> head;
  for (Array& a : hg) head.push_back(dev_upd->upload(std::move(a)));
  std::vector<Array> du = run_lent(*dev_upd, std::move(head), t.inputs_, from);
  for (int i = 0; i < n; ++i)
    r.update.push_back(relative_change(t.param_names_[size_t(i)], du[size_t(upd.param_output(i))],
                                       hu[size_t(upd.param_output(i))],
                                       host_in[size_t(step.param_input(i))]));
  // State scored per parameter (flat buckets cut into their parameters), as checkpoints name it.
  auto per_param = [&](const std::vector<Array>& v, auto position) {
    auto slot = [&](int j) { return v[size_t(position(j))]; };
    if (step.flat) return optim::whole_state(*step.flat, step.state, slot);
    std::vector<Array> out;
    for (int j = 0; j < step.state.size(); ++j) out.push_back(slot(j));
    return out;
  };
  auto out_pos = [&](int j) { return upd.state_output(j); };
  const std::vector<Array> ds = per_param(du, out_pos), hs = per_param(hu, out_pos),
                           before = per_param(host_in, [&](int j) { return step.state_input(j); });
  for (size_t j = 0; j < ds.size(); ++j)
    r.update.push_back(relative_change(t.state_name(int(j)), ds[j], hs[j], before[j]));
  const int fi = upd.found_inf_output(), gn = upd.grad_norm_output();
  r.update.push_back(relative_l2("found_inf", du[size_t(fi)], hu[size_t(fi)]));
  if (gn >= 0) r.update.push_back(relative_l2("grad_norm", du[size_t(gn)], hu[size_t(gn)]));
  return r;
}

CrossCheckReport cross_check(Trainer& t, Batch inputs) {
  return CrossCheckAccess::run(t, std::move(inputs));
}

}  // namespace tlaloc::train
