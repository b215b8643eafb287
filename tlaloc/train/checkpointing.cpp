#include "tlaloc/train/checkpointing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace tlaloc::train {

namespace {

std::vector<io::TensorSpec> specs(const std::vector<std::pair<std::string, ir::TensorType>>& v) {
  std::vector<io::TensorSpec> out;
  for (auto& [n, t] : v) out.push_back({n, t.dtype, t.shape});
  return out;
}

std::string flag(bool b) { return b ? "true" : "false"; }

const char* const kStepTensor = "optimizer.step";

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// How many elements of a floating-point array `bad` picks (f32 read directly, others by at()).
template <typename Pred>
int64_t count_if(const Array& a, Pred bad) {
  if (a.dtype() == DType::f32) {
    const float* x = a.data<float>();
    return std::count_if(x, x + a.numel(), [&](float f) { return bad(double(f)); });
  }
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += bad(a.at(i));
  return n;
}

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
  for (auto& b : t.named_buffers()) c.params.push_back(std::move(b));  // state_dict's buffers
  c.optimizer_state = t.optimizer_state();
  c.optimizer = optim::name(t.optimizer());
  c.hyper_parameters = hyper_parameters(t.optimizer());
  c.step = t.steps_taken();
  for (const auto& [name, a] : c.optimizer_state)  // updates applied; the rest were skipped
    if (name == kStepTensor) c.skipped_steps = c.step - int64_t(a.at(0));
  c.seed = seed;
  c.data_position = data_position;
  c.user = std::move(user);
  return c;
}

void restore(Trainer& t, const io::Checkpoint& ckpt) {
  std::string kind = optim::name(t.optimizer());
  if (ckpt.has_optimizer_state() && ckpt.optimizer != kind)
    fail("{}: checkpoint optimizer is {}, this run uses {}", ckpt.source, ckpt.optimizer, kind);
  auto param_specs = t.parameter_specs(), buffer_specs = t.buffer_specs();
  auto want = param_specs;
  want.insert(want.end(), buffer_specs.begin(), buffer_specs.end());
  auto params = io::restore_params(ckpt, specs(want));
  std::vector<Array> buffers(
      std::make_move_iterator(params.begin() + ptrdiff_t(param_specs.size())),
      std::make_move_iterator(params.end()));
  params.resize(param_specs.size());
  auto state = io::restore_optimizer_state(ckpt, specs(t.state_specs()));
  t.load_buffers(std::move(buffers));
  t.load_state(std::move(params), std::move(state), ckpt.step);
}

io::Checkpoint load_resume(const std::string& path, const std::map<std::string, std::string>& user,
                           uint64_t seed) {
  io::Checkpoint c = io::load_checkpoint(path);
  check_resume_fields(c, path, user, seed);
  return c;
}

void check_resume_fields(const io::Checkpoint& c, const std::string& path,
                         const std::map<std::string, std::string>& user, uint64_t seed) {
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
  // Then the model kind (fmnist's mlp / cnn): another architecture differs in every size field.
  if (auto m = user.find("model");
      m != user.end() && c.user.count("model") && c.user.at("model") != m->second)
    fail("--resume {}: it is a --model {} checkpoint, this run is --model {}", path,
         c.user.at("model"), m->second);
  // The text's paths may change (a moved folder) when its bytes do not.
  auto digest = user.find("text_digest");
  const bool same_text = digest != user.end() && c.user.count("text_digest") &&
                         c.user.at("text_digest") == digest->second;
  for (const auto& [k, v] : user)
    if (c.user.count(k) && c.user.at(k) != v && !(k == "text" && same_text))
      fail("--resume {}: it was trained with {}={}, this run has {}", path, k, c.user.at(k), v);
  // Fields only some runs have, whose absence means something: a run without --freeze would
  // train the tensors the checkpoint kept frozen (their moments are not in it).
  for (const char* k : {"freeze", "lora"})
    if (c.user.count(k) && !user.count(k) && user.count("recipe"))
      fail("--resume {}: it was trained with {}={}, this run has none", path, k, c.user.at(k));
  // Checkpoints from before mixed precision have no precision field: they were f32.
  if (auto p = user.find("precision");
      p != user.end() && !c.user.count("precision") && p->second != "f32")
    fail("--resume {}: it was trained with precision=f32 (it records none), this run has {}", path,
         p->second);
  if (c.seed && *c.seed != seed)
    fail("--resume {}: it was trained with --seed {}, this run has {}", path, *c.seed, seed);
}

void restore_model(nn::Module& m, const io::Checkpoint& ckpt) {
  auto named = m.named_parameters();
  auto buffers = m.named_buffers();
  std::vector<io::TensorSpec> want;
  for (auto& p : named) want.push_back({p.name, p.param->value.dtype(), p.param->value.shape()});
  for (auto& b : buffers)
    want.push_back({b.name, b.buffer->value.dtype(), b.buffer->value.shape()});
  auto arrays = io::restore_params(ckpt, want);
  for (size_t i = 0; i < named.size(); ++i) named[i].param->value = std::move(arrays[i]);
  for (size_t i = 0; i < buffers.size(); ++i)
    buffers[i].buffer->value = std::move(arrays[named.size() + i]);
}

void require_finite(const io::NamedArrays& arrays, const std::string& where,
                    const std::string& kind) {
  for (const auto& [name, a] : arrays) {
    if (!is_floating(a.dtype())) continue;
    const int64_t bad = count_if(a, [](double v) { return !std::isfinite(v); });
    if (bad > 0)
      fail("{}: {} '{}' holds {} NaN or inf values of {} (a diverged run or a damaged file)", where,
           kind, name, bad, a.numel());
  }
}

void check_resumable(const io::Checkpoint& c, const std::string& where) {
  for (const io::NamedArrays* arrays : {&c.params, &c.optimizer_state})
    require_finite(*arrays, where, "tensor");
  for (const auto& [name, a] : c.optimizer_state) {
    // ".exp_avg_sq" and ".max_exp_avg_sq"
    if (!is_floating(a.dtype()) || !ends_with(name, "exp_avg_sq")) continue;
    const int64_t bad = count_if(a, [](double v) { return v < 0; });
    if (bad > 0)
      fail(
          "{}: tensor '{}' holds {} negative values of {} (a second moment is never negative: a "
          "damaged file)",
          where, name, bad, a.numel());
  }
  if (!c.has_optimizer_state()) return;  // restore() refuses it, naming what is missing
  if (c.step < 0)
    fail(
        "{}: its metadata says step {}: a step count is never negative (an edited or damaged file)",
        where, c.step);
  if (c.data_position && *c.data_position < 0)
    fail(
        "{}: its metadata says data_position {}: a position is never negative (an edited or "
        "damaged file)",
        where, *c.data_position);
  if (c.skipped_steps < 0 || c.skipped_steps > c.step)
    fail("{}: its metadata says {} of its {} steps were skipped: an edited or damaged file", where,
         c.skipped_steps, c.step);
  const std::string said = c.skipped_steps == 0
                               ? fmt::format("step {}", c.step)
                               : fmt::format("step {} ({} skipped)", c.step, c.skipped_steps);
  auto it = std::find_if(c.optimizer_state.begin(), c.optimizer_state.end(),
                         [](const auto& s) { return s.first == kStepTensor; });
  if (it == c.optimizer_state.end())
    fail("{}: its metadata says {}, but it has no tensor '{}' (the updates applied)", where, said,
         kStepTensor);
  const Array& a = it->second;
  if (a.numel() != 1 || a.at(0) != double(c.step - c.skipped_steps))
    fail(
        "{}: its metadata says {}, but tensor '{}' holds {} (the updates applied): an edited or "
        "damaged file",
        where, said, kStepTensor, a.numel() == 1 ? fmt::format("{}", a.at(0)) : describe(a));
}

}  // namespace tlaloc::train
