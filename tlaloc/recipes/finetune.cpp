#include "tlaloc/recipes/finetune.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

#include "tlaloc/io/hf_dir.h"
#include "tlaloc/nn/lora.h"
#include "tlaloc/train/checkpointing.h"

namespace tlaloc::recipes {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

std::string trained_text(nn::Module& model) {
  int64_t n = 0;
  for (auto& p : model.named_parameters())
    if (p.param->requires_grad) n += p.param->value.numel();
  return fmt::format(", {} trained", n);
}

train::FitOptions::CheckpointFormat lora_format(const io::PeftLoraConfig& cfg,
                                                const std::string& name) {
  train::FitOptions::CheckpointFormat format;
  format.folder = true;
  format.check_output = [](const std::string& path, const std::string& what) {
    io::check_output_adapter_dir(path, what);
    io::check_output_file(io::training_state_path(path), what, io::OutputMode::replace);
  };
  const std::string what = name + ": --save";
  format.save = [cfg, what](const std::string& path, const io::Checkpoint& ck) {
    io::save_peft_checkpoint(path, cfg, ck, what);
  };
  format.load = [cfg](const std::string& path) {
    io::PeftAdapter a = io::load_peft_adapter(path);
    io::require_training_state(path,
                               "to train on from the adapter's weights, give it with --adapter");
    const io::PeftLoraConfig& h = a.config;
    if (h.r != cfg.r || h.lora_alpha != cfg.lora_alpha || h.lora_dropout != cfg.lora_dropout ||
        h.use_rslora != cfg.use_rslora || h.target_modules != cfg.target_modules)
      fail(
          "--resume {}: its adapter (r {}, lora_alpha {}, lora_dropout {}, use_rslora {}, targets "
          "{}) is not this run's (r {}, lora_alpha {}, lora_dropout {}, use_rslora {}, targets {})",
          path, h.r, h.lora_alpha, h.lora_dropout, h.use_rslora, join(h.target_modules), cfg.r,
          cfg.lora_alpha, cfg.lora_dropout, cfg.use_rslora, join(cfg.target_modules));
    return io::load_peft_checkpoint(a, true);
  };
  return format;
}

void frozen_format(nn::Module& model, const std::string& freeze,
                   train::FitOptions::CheckpointFormat& format, const train::Trainer*& trainer) {
  auto save = format.save;
  format.save = [save, &trainer](const std::string& path, const io::Checkpoint& ck) {
    io::Checkpoint all = ck;
    for (auto& t : trainer->frozen_parameters()) all.params.push_back(std::move(t));
    save(path, all);
  };
  auto load = format.load;
  format.load = [load, &model, freeze](const std::string& path) {
    io::Checkpoint ck = load(path);
    // Before the tensors: another pattern freezes other tensors, which would be named instead.
    const auto was = ck.user.find("freeze");
    if (was == ck.user.end() || was->second != freeze)
      fail("--resume {}: it was trained with {}, this run has freeze={}", path,
           was == ck.user.end() ? std::string("no --freeze") : "freeze=" + was->second, freeze);
    std::map<std::string, const Array*> frozen;
    for (auto& p : model.named_parameters())
      if (!p.param->requires_grad) frozen[p.name] = &p.param->value;
    io::NamedArrays kept;
    for (auto& [name, a] : ck.params) {
      auto it = frozen.find(name);
      if (it == frozen.end()) {
        kept.emplace_back(name, std::move(a));
        continue;
      }
      const Array& want = *it->second;
      if (a.dtype() != want.dtype() || a.shape() != want.shape() ||
          std::memcmp(a.raw(), want.raw(), want.nbytes()) != 0)
        fail("--resume {}: its frozen tensor '{}' is not the one it starts from", path, name);
    }
    ck.params = std::move(kept);
    return ck;
  };
}

train::FitOptions::CheckpointFormat single_file_format() {
  train::FitOptions::CheckpointFormat format;
  format.check_output = [](const std::string& path, const std::string& what) {
    io::check_checkpoint_output(path, what);
  };
  format.save = [](const std::string& path, const io::Checkpoint& ck) {
    io::save_checkpoint(path, ck);
  };
  format.load = [](const std::string& path) { return io::load_checkpoint(path); };
  return format;
}

void apply_peft_adapter(nn::Module& model, const io::PeftAdapter& adapter,
                        std::optional<random::Key> fresh) {
  std::vector<std::string> modules;
  for (const auto& [name, a] : adapter.tensors)
    if (name.ends_with(".lora_A.weight"))
      modules.push_back(name.substr(0, name.size() - std::strlen(".lora_A.weight")));
  for (const auto& m : modules)  // PEFT would not adapt it: its tensors would be left unused
    if (!nn::is_lora_target(m, adapter.config.target_modules))
      fail("{}: module '{}' has adapter tensors but its target_modules do not name it",
           adapter.path, m);
  train::require_finite(adapter.tensors, adapter.path, "adapter tensor");
  nn::LoraConfig c{.r = adapter.config.r,
                   .lora_alpha = adapter.config.lora_alpha,
                   .lora_dropout = adapter.config.lora_dropout,
                   .use_rslora = adapter.config.use_rslora};
  try {
    if (fresh) {
      c.target_modules = adapter.config.target_modules;
      nn::add_lora(model, c, *fresh);
    } else {
      nn::add_lora_to(model, modules, c);
    }
  } catch (const Error& e) {
    fail("{}: {}", adapter.path, e.what());
  }
  std::map<std::string, nn::Parameter*> params;
  for (auto& p : model.named_parameters()) params[p.name] = p.param;
  for (const auto& [name, a] : adapter.tensors) {
    nn::Parameter* p = params.at(name);
    Array v = a.dtype() == DType::bf16 || a.dtype() == DType::f16 ? a.astype(DType::f32) : a;
    if (v.dtype() != p->value.dtype() || v.shape() != p->value.shape())
      fail("{}: tensor '{}{}' is {}, the model's is {}", adapter.path, io::kPeftPrefix, name,
           describe(a), describe(p->value));
    p->value = std::move(v);
  }
}

io::NamedArrays merged_parameters(nn::Module& model, const std::string& what) {
  io::NamedArrays merged_list = nn::merged_lora_weights(model);
  train::require_finite(merged_list, what, "merged weight");
  std::map<std::string, Array> merged;
  for (auto& [name, w] : merged_list) merged[name] = std::move(w);
  io::NamedArrays out;
  for (auto& p : model.named_parameters()) {
    if (p.name.find(".lora_") != std::string::npos) continue;
    auto it = merged.find(p.name);
    out.emplace_back(p.name, it == merged.end() ? p.param->value : it->second);
  }
  return out;
}

void check_adapter_base(const io::Checkpoint& state, const std::string& base_digest,
                        const std::string& base, const std::string& adapter) {
  auto want = state.user.find("base_model");
  if (want == state.user.end()) return;
  if (want->second != base_digest)
    fail(
        "{}: was trained on another base model than {} (its training state's base_model {}, "
        "{}'s {})",
        adapter, base, want->second, base, base_digest);
}

std::string merge_line(size_t adapted, const io::PeftLoraConfig& adapter,
                       const std::string& adapter_dir, const std::string& base,
                       const std::string& out) {
  const double scaling =
      nn::LoraConfig{
          .r = adapter.r, .lora_alpha = adapter.lora_alpha, .use_rslora = adapter.use_rslora}
          .scaling();
  return fmt::format("merged the {} LoRA adapters of {} (r {}, scaling {}) into {}: wrote {}\n",
                     adapted, adapter_dir, adapter.r, scaling, base, out);
}

}  // namespace tlaloc::recipes
