#include "tlaloc/train/checkpointing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tlaloc::train {

namespace {

std::vector<io::TensorSpec> specs(const std::vector<std::pair<std::string, ir::TensorType>>& v) {
  std::vector<io::TensorSpec> out;
  for (auto& [n, t] : v) out.push_back({n, t.dtype, t.shape});
  return out;
}

std::string flag(bool b) { return b ? "true" : "false"; }

}  // namespace

std::map<std::string, std::string> hyper_parameters(const optim::Optimizer& opt) {
  std::map<std::string, std::string> h;
  std::visit(
      [&](const auto& o) {
        h["lr"] = io::exact(o.lr);
        h["weight_decay"] = io::exact(o.weight_decay);
        h["maximize"] = flag(o.maximize);
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, optim::SGD>) {
          h["momentum"] = io::exact(o.momentum);
          h["dampening"] = io::exact(o.dampening);
          h["nesterov"] = flag(o.nesterov);
        } else {
          h["betas"] = fmt::format("{},{}", io::exact(o.betas[0]), io::exact(o.betas[1]));
          h["eps"] = io::exact(o.eps);
          h["amsgrad"] = flag(o.amsgrad);
        }
      },
      opt);
  return h;
}

io::Checkpoint to_checkpoint(const Trainer& t, uint64_t seed, int64_t data_position,
                             std::map<std::string, std::string> user) {
  io::Checkpoint c;
  c.params = t.named_parameters();
  c.optimizer_state = t.optimizer_state();
  c.optimizer = optim::name(t.optimizer());
  c.hyper_parameters = hyper_parameters(t.optimizer());
  c.step = t.steps_taken();
  c.seed = seed;
  c.data_position = data_position;
  c.user = std::move(user);
  return c;
}

void restore(Trainer& t, const io::Checkpoint& ckpt) {
  std::string kind = optim::name(t.optimizer());
  if (ckpt.has_optimizer_state() && ckpt.optimizer != kind)
    fail("{}: checkpoint optimizer is {}, this run uses {}", ckpt.source, ckpt.optimizer, kind);
  auto params = io::restore_params(ckpt, specs(t.parameter_specs()));
  auto state = io::restore_optimizer_state(ckpt, specs(t.state_specs()));
  t.load_state(std::move(params), std::move(state), ckpt.step);
}

io::Checkpoint load_resume(const std::string& path, const std::map<std::string, std::string>& user,
                           uint64_t seed) {
  io::Checkpoint c = io::load_checkpoint(path);
  // The recipe first: another recipe's checkpoint differs in every field, name the real cause.
  if (auto r = user.find("recipe"); r != user.end()) {
    auto have = c.user.find("recipe");
    if (have == c.user.end())
      fail("--resume {}: not a checkpoint of `tlaloc train {}` (it has no recipe metadata)", path,
           r->second);
    if (have->second != r->second)
      fail("--resume {}: it is a `tlaloc train {}` checkpoint, this is `tlaloc train {}`", path,
           have->second, r->second);
  }
  for (const auto& [k, v] : user)
    if (c.user.count(k) && c.user.at(k) != v)
      fail("--resume {}: it was trained with {}={}, this run has {}", path, k, c.user.at(k), v);
  if (c.seed && *c.seed != seed)
    fail("--resume {}: it was trained with --seed {}, this run has {}", path, *c.seed, seed);
  return c;
}

void restore_model(nn::Module& m, const io::Checkpoint& ckpt) {
  auto named = m.named_parameters();
  std::vector<io::TensorSpec> want;
  for (auto& p : named) want.push_back({p.name, p.param->value.dtype(), p.param->value.shape()});
  auto arrays = io::restore_params(ckpt, want);
  for (size_t i = 0; i < named.size(); ++i) named[i].param->value = std::move(arrays[i]);
}

void require_finite(const io::NamedArrays& arrays, const std::string& where,
                    const std::string& kind) {
  for (const auto& [name, a] : arrays) {
    if (a.dtype() != DType::f32) continue;
    const float* x = a.data<float>();
    const int64_t bad = std::count_if(x, x + a.numel(), [](float f) { return !std::isfinite(f); });
    if (bad > 0)
      fail("{}: {} '{}' holds {} NaN or inf values of {} (a diverged run or a damaged file)", where,
           kind, name, bad, a.numel());
  }
}

}  // namespace tlaloc::train
