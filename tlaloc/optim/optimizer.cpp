#include "tlaloc/optim/optimizer.h"

#include <cmath>
#include <cstdint>

namespace tlaloc::optim {

namespace {
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

void check_nonneg(const std::string& opt, const char* what, double v) {
  if (!(v >= 0) || !std::isfinite(v))
    fail("{}: invalid {} {} (must be finite and >= 0)", opt, what, v);
}

bool is_no_decay(const std::string& name, const Shape& shape) {
  if (shape.rank() < 2) return true;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string part =
        name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.find("norm") != std::string::npos) return true;
    if (dot == std::string::npos) return part == "bias";
    start = dot + 1;
  }
  return false;
}
}  // namespace

std::string name(const Optimizer& opt) {
  return std::visit(Overloaded{[](const SGD&) { return std::string("SGD"); },
                               [](const Adam&) { return std::string("Adam"); },
                               [](const AdamW&) { return std::string("AdamW"); }},
                    opt);
}

double base_lr(const Optimizer& opt) {
  return std::visit([](const auto& o) { return o.lr; }, opt);
}
double base_weight_decay(const Optimizer& opt) {
  return std::visit([](const auto& o) { return o.weight_decay; }, opt);
}

void validate(const Optimizer& opt) {
  std::string n = name(opt);
  check_nonneg(n, "lr", base_lr(opt));
  check_nonneg(n, "weight_decay", base_weight_decay(opt));
  std::visit(Overloaded{[&](const SGD& o) {
                          check_nonneg(n, "momentum", o.momentum);
                          check_nonneg(n, "dampening", o.dampening);
                          if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
                            fail(
                                "SGD: nesterov needs momentum > 0 and dampening == 0 (got "
                                "momentum {}, dampening {})",
                                o.momentum, o.dampening);
                        },
                        [&](const auto& o) {
                          check_nonneg(n, "eps", o.eps);
                          for (int i = 0; i < 2; ++i)
                            if (!(o.betas[size_t(i)] >= 0 && o.betas[size_t(i)] < 1))
                              fail(
                                  "{}: invalid beta parameter at index {}: {} (need 0 <= beta < 1)",
                                  n, i, o.betas[size_t(i)]);
                        }},
             opt);
}

std::vector<ParamGroup> decay_groups(std::span<const std::string> names,
                                     std::span<const Shape> shapes, double weight_decay) {
  if (names.size() != shapes.size())
    fail("decay_groups: {} names for {} shapes", names.size(), shapes.size());
  ParamGroup decay{"decay", {}, std::nullopt, weight_decay};
  ParamGroup no_decay{"no_decay", {}, std::nullopt, 0.0};
  for (size_t i = 0; i < names.size(); ++i)
    (is_no_decay(names[i], shapes[i]) ? no_decay : decay).params.push_back(int(i));
  std::vector<ParamGroup> out;
  if (!decay.params.empty()) out.push_back(std::move(decay));
  if (!no_decay.params.empty()) out.push_back(std::move(no_decay));
  return out;
}

std::vector<ParamGroup> resolve_groups(const Optimizer& opt, std::vector<ParamGroup> groups,
                                       int num_params) {
  if (groups.empty()) {
    ParamGroup all{"all", {}, std::nullopt, std::nullopt};
    for (int i = 0; i < num_params; ++i) all.params.push_back(i);
    groups.push_back(std::move(all));
  }
  std::vector<int> owner(size_t(num_params), -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    ParamGroup& grp = groups[g];
    if (!grp.lr) grp.lr = base_lr(opt);
    if (!grp.weight_decay) grp.weight_decay = base_weight_decay(opt);
    check_nonneg(name(opt) + " group '" + grp.name + "'", "lr", *grp.lr);
    check_nonneg(name(opt) + " group '" + grp.name + "'", "weight_decay", *grp.weight_decay);
    for (int p : grp.params) {
      if (p < 0 || p >= num_params)
        fail("parameter group '{}': index {} out of range for {} parameters", grp.name, p,
             num_params);
      if (owner[size_t(p)] >= 0)
        fail("parameter {} is in groups '{}' and '{}'", p, groups[size_t(owner[size_t(p)])].name,
             grp.name);
      owner[size_t(p)] = int(g);
    }
  }
  for (int p = 0; p < num_params; ++p)
    if (owner[size_t(p)] < 0) fail("parameter {} is in no parameter group", p);
  return groups;
}

std::string_view name(StateKind k) {
  switch (k) {
    case StateKind::momentum_buffer:
      return "momentum_buffer";
    case StateKind::exp_avg:
      return "exp_avg";
    case StateKind::exp_avg_sq:
      return "exp_avg_sq";
    case StateKind::max_exp_avg_sq:
      return "max_exp_avg_sq";
    case StateKind::loss_scale:
      return "scale";
    case StateKind::growth_tracker:
      return "growth_tracker";
    case StateKind::step:
      return "step";
  }
  return "?";
}

int StateLayout::find(int param, StateKind kind) const {
  for (int i = 0; i < size(); ++i)
    if (slots[size_t(i)].param == param && slots[size_t(i)].bucket < 0 &&
        slots[size_t(i)].kind == kind)
      return i;
  return -1;
}

int StateLayout::find_bucket(int bucket, StateKind kind) const {
  for (int i = 0; i < size(); ++i)
    if (slots[size_t(i)].bucket == bucket && slots[size_t(i)].kind == kind) return i;
  return -1;
}

ir::TensorType master_type(const ir::TensorType& t) {
  if (!is_floating(t.dtype))
    fail("optimizer: parameter of type {} is not floating point", to_string(t));
  return {t.dtype == DType::f64 ? DType::f64 : DType::f32, t.shape};
}

StateLayout state_layout(const Optimizer& opt, std::span<const ir::TensorType> params,
                         std::span<const std::string> names) {
  if (!names.empty() && names.size() != params.size())
    fail("state_layout: {} names for {} parameters", names.size(), params.size());
  std::vector<StateKind> kinds;
  std::visit(Overloaded{[&](const SGD& o) {
                          if (o.momentum != 0) kinds.push_back(StateKind::momentum_buffer);
                        },
                        [&](const auto& o) {
                          kinds = {StateKind::exp_avg, StateKind::exp_avg_sq};
                          if (o.amsgrad) kinds.push_back(StateKind::max_exp_avg_sq);
                        }},
             opt);
  StateLayout l;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string pname = names.empty() ? std::to_string(i) : names[i];
    for (StateKind k : kinds)
      l.slots.push_back({pname + "." + std::string(name(k)), k, int(i), master_type(params[i])});
  }
  l.slots.push_back({"step", StateKind::step, -1, {DType::s32, Shape{}}});
  return l;
}

void add_loss_scaling(StateLayout& layout, const UpdateOptions::LossScaling& s) {
  if (!(s.init_scale > 0) || !std::isfinite(s.init_scale))
    fail("loss scaling: init_scale {} must be finite and > 0", s.init_scale);
  if (!(s.growth_factor > 1) || !std::isfinite(s.growth_factor))
    fail("loss scaling: growth_factor {} must be finite and > 1", s.growth_factor);
  if (!(s.backoff_factor > 0 && s.backoff_factor < 1))
    fail("loss scaling: backoff_factor {} must be in (0, 1)", s.backoff_factor);
  if (s.growth_interval < 1 || s.growth_interval > INT32_MAX)  // counted in an s32
    fail("loss scaling: growth_interval {} must be in [1, 2^31 - 1]", s.growth_interval);
  if (layout.find(-1, StateKind::loss_scale) >= 0) fail("loss scaling: added twice");
  auto at = layout.slots.begin() + layout.step_index();
  at = layout.slots.insert(
      at, {"scale", StateKind::loss_scale, -1, {DType::f32, Shape{}}, double(float(s.init_scale))});
  layout.slots.insert(at + 1,
                      {"growth_tracker", StateKind::growth_tracker, -1, {DType::s32, Shape{}}});
}

std::vector<Array> init_state(const StateLayout& layout) {
  std::vector<Array> out;
  for (const StateSlot& s : layout.slots) {
    out.emplace_back(s.type.dtype, s.type.shape);
    if (s.init != 0) {
      if (s.type.shape.rank() != 0 || s.type.dtype != DType::f32)
        fail("init_state: slot '{}' starts at {}: only f32 scalars can", s.name, s.init);
      out.back().data<float>()[0] = float(s.init);
    }
  }
  return out;
}

}  // namespace tlaloc::optim
