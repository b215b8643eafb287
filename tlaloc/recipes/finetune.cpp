#include "tlaloc/recipes/finetune.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstring>
#include <map>

#include "tlaloc/io/hf_dir.h"

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
    struct stat st {};
    if (::stat(io::training_state_path(path).c_str(), &st) != 0)
      fail(
          "--resume {}: no training state beside it ({}), so there is no run to continue; to "
          "train on from the adapter's weights, give it with --adapter",
          path, io::training_state_path(path));
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

void frozen_format(nn::Module& model, train::FitOptions::CheckpointFormat& format,
                   const train::Trainer*& trainer) {
  auto save = format.save;
  format.save = [save, &trainer](const std::string& path, const io::Checkpoint& ck) {
    io::Checkpoint all = ck;
    for (auto& t : trainer->frozen_parameters()) all.params.push_back(std::move(t));
    save(path, all);
  };
  auto load = format.load;
  format.load = [load, &model](const std::string& path) {
    io::Checkpoint ck = load(path);
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
    io::check_output_file(path, what, io::OutputMode::replace);
  };
  format.save = [](const std::string& path, const io::Checkpoint& ck) {
    io::save_checkpoint(path, ck);
  };
  format.load = [](const std::string& path) { return io::load_checkpoint(path); };
  return format;
}

}  // namespace tlaloc::recipes
