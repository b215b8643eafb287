#include "tlaloc/nn/lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

namespace {

bool matches(const std::string& name, const std::string& target) {
  return name == target || (name.size() > target.size() &&
                            name.compare(name.size() - target.size(), target.size(), target) == 0 &&
                            name[name.size() - target.size() - 1] == '.');
}

std::vector<std::pair<std::string, Linear*>> linears(Module& model) {
  std::vector<std::pair<std::string, Linear*>> out;
  for (auto& [name, m] : model.named_modules())
    if (auto* l = dynamic_cast<Linear*>(m)) {
      // An adapter's own A and B are not targets.
      if (name.ends_with(".lora_A") || name.ends_with(".lora_B")) continue;
      out.emplace_back(name, l);
    }
  return out;
}

bool is_adapter_parameter(const std::string& name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

}  // namespace

bool is_lora_target(const std::string& name, const std::vector<std::string>& targets) {
  if (targets.size() == 1 && targets[0] == "all-linear") return !matches(name, "lm_head");
  for (const auto& t : targets)
    if (matches(name, t)) return true;
  return false;
}

double LoraConfig::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(double(r)) : lora_alpha / double(r);
}

std::vector<std::string> add_lora(Module& model, const LoraConfig& c, const random::Key& key) {
  if (c.r < 1) fail("LoRA: r = {} must be >= 1", c.r);
  if (!std::isfinite(c.lora_alpha)) fail("LoRA: lora_alpha {} must be finite", c.lora_alpha);
  if (!(c.lora_dropout >= 0 && c.lora_dropout < 1))
    fail("LoRA: lora_dropout {} must be in [0, 1)", c.lora_dropout);
  if (c.target_modules.empty()) fail("LoRA: target_modules is empty");
  for (size_t i = 0; i < c.target_modules.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c.target_modules[i] == c.target_modules[j])
        fail("LoRA: target_modules names '{}' twice", c.target_modules[i]);
  auto all = linears(model);
  std::string have;
  for (auto& [name, l] : all) have += (have.empty() ? "" : ", ") + name;
  const bool all_linear = c.target_modules.size() == 1 && c.target_modules[0] == "all-linear";
  std::vector<std::pair<std::string, Linear*>> chosen;
  for (auto& [name, l] : all) {
    bool hit = false;
    if (all_linear) {
      hit = !matches(name, "lm_head");
    } else {
      for (const auto& t : c.target_modules) hit = hit || matches(name, t);
    }
    if (hit && l->has_lora()) fail("LoRA: module '{}' has an adapter already", name);
    if (hit) chosen.emplace_back(name, l);
  }
  if (!all_linear)
    for (const auto& t : c.target_modules) {
      bool any = false;
      for (auto& [name, l] : all) any = any || matches(name, t);
      if (t == "all-linear") fail("LoRA: target_modules 'all-linear' must be the only target");
      if (!any)
        fail(
            "LoRA: target_modules '{}' matches no Linear module of the model (its Linear modules: "
            "{})",
            t, have.empty() ? "none" : have);
    }
  if (chosen.empty()) fail("LoRA: target_modules match no Linear module (there are: {})", have);
  auto keys = random::split(key, int(chosen.size()));
  std::vector<std::string> names;
  for (size_t i = 0; i < chosen.size(); ++i) {
    Linear& l = *chosen[i].second;
    l.add_lora(c.r, c.scaling(), c.lora_dropout);
    l.child("lora_A").reset_parameters(keys[i]);
    l.child("lora_B").reset_parameters(keys[i]);
    names.push_back(chosen[i].first);
  }
  for (auto& p : model.named_parameters()) p.param->requires_grad = is_adapter_parameter(p.name);
  return names;
}

void add_lora_to(Module& model, const std::vector<std::string>& modules, const LoraConfig& c) {
  auto all = linears(model);
  std::vector<Linear*> chosen;
  for (const auto& m : modules) {
    auto it = std::find_if(all.begin(), all.end(), [&](auto& l) { return l.first == m; });
    if (it == all.end()) fail("LoRA: module '{}' is not a Linear module of the model", m);
    if (it->second->has_lora()) fail("LoRA: module '{}' has an adapter already", m);
    chosen.push_back(it->second);
  }
  if (c.r < 1) fail("LoRA: r = {} must be >= 1", c.r);
  if (!std::isfinite(c.scaling())) fail("LoRA: the scaling {} must be finite", c.scaling());
  if (!(c.lora_dropout >= 0 && c.lora_dropout < 1))
    fail("LoRA: lora_dropout {} must be in [0, 1)", c.lora_dropout);
  for (Linear* l : chosen) l->add_lora(c.r, c.scaling(), c.lora_dropout);
  for (auto& p : model.named_parameters()) p.param->requires_grad = is_adapter_parameter(p.name);
}

std::vector<std::string> lora_modules(Module& model) {
  std::vector<std::string> out;
  for (auto& [name, l] : linears(model))
    if (l->has_lora()) out.push_back(name);
  return out;
}

std::vector<std::pair<std::string, Array>> merged_lora_weights(Module& model) {
  std::vector<std::pair<std::string, Array>> out;
  for (auto& [name, l] : linears(model)) {
    if (!l->has_lora()) continue;
    const std::string prefix = name.empty() ? "" : name + ".";
    Array w;
    for (auto& p : l->named_parameters())
      if (p.name == "weight") w = p.param->value;
    const Array a = l->child("lora_A").named_parameters()[0].param->value;  // [r, in]
    const Array b = l->child("lora_B").named_parameters()[0].param->value;  // [out, r]
    const int64_t out_f = l->out_features(), in_f = l->in_features(), r = l->lora_r();
    std::vector<double> wd = w.to_doubles(), ad = a.to_doubles(), bd = b.to_doubles();
    const double s = l->lora_scaling();
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t i = 0; i < in_f; ++i) {
        double acc = 0;
        for (int64_t k = 0; k < r; ++k) acc += bd[size_t(o * r + k)] * ad[size_t(k * in_f + i)];
        wd[size_t(o * in_f + i)] += s * acc;
      }
    out.emplace_back(prefix + "weight", Array::from_doubles(w.dtype(), w.shape(), wd));
  }
  return out;
}

}  // namespace tlaloc::nn
