#include "tlaloc/recipes/lm_adapter.h"

#include <fmt/format.h>

#include <vector>

#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/peft.h"
#include "tlaloc/nn/lora.h"
#include "tlaloc/recipes/finetune.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/train/checkpointing.h"

namespace tlaloc::recipes::lm {

namespace {

// The digest a fine-tuning run records as its base_model (lm::run's).
std::string params_digest(const io::Checkpoint& c) {
  std::vector<io::TensorRef> refs;
  for (const auto& [n, a] : c.params) refs.push_back(io::tensor_ref(n, a));
  return io::tensors_digest(refs);
}

}  // namespace

void add_adapter(nn::CausalLM& model, const io::Checkpoint& base, const std::string& base_path,
                 const std::string& adapter_dir) {
  const io::PeftAdapter adapter = io::load_peft_adapter(adapter_dir);
  check_adapter_base(io::load_peft_checkpoint(adapter, true), params_digest(base), base_path,
                     adapter_dir);
  apply_peft_adapter(model, adapter);
  model.eval();  // inference: lora_dropout off
}

void merge_adapter(const std::string& ckpt, const std::string& adapter_dir, const std::string& out,
                   std::FILE* log) {
  const std::string what = "merge: " + out;
  io::check_checkpoint_output(out, what);
  for (const std::string& in : {ckpt, io::training_state_path(adapter_dir)})
    if (io::same_file(out, in))
      fail("{} is {}: write the merged model to a file of its own", what, in);
  const io::Checkpoint base = io::load_checkpoint(ckpt);
  std::unique_ptr<nn::CausalLM> model = load_model(base);
  add_adapter(*model, base, ckpt, adapter_dir);
  const size_t adapted = nn::lora_modules(*model).size();
  io::Checkpoint c;
  c.params = merged_parameters(*model, what);
  for (const char* k : {"recipe", "layers", "d_model", "heads", "kv_heads", "context", "d_ff",
                        "tied", "norm", "gelu", "dropout"})  // the model's fields, not the run's
    if (auto it = base.user.find(k); it != base.user.end()) c.user[k] = it->second;
  c.seed = base.seed;
  io::save_checkpoint(out, c);
  fmt::print(
      log, "{}",
      merge_line(adapted, io::load_peft_adapter(adapter_dir).config, adapter_dir, ckpt, out));
}

}  // namespace tlaloc::recipes::lm
