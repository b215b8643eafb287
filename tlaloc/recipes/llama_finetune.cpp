#include "tlaloc/recipes/llama_finetune.h"

#include <fmt/format.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "tlaloc/io/atomic_dir.h"
#include "tlaloc/io/json_util.h"
#include "tlaloc/random/random.h"
#include "tlaloc/train/checkpointing.h"

namespace tlaloc::recipes::llama {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

io::PeftLoraConfig peft_config(const Config& c) {
  io::PeftLoraConfig p;
  p.r = c.lora->r;
  p.lora_alpha = c.lora->lora_alpha;
  p.lora_dropout = c.lora->lora_dropout;
  p.use_rslora = c.lora->use_rslora;
  p.target_modules = c.lora->target_modules;
  p.base_model_name_or_path = std::filesystem::absolute(c.init).lexically_normal().string();
  return p;
}

void add_finetune_fields(const Config& c, const io::HfModelDir& init,
                         std::map<std::string, std::string>& fields) {
  fields["base_model"] = io::tensors_digest(init.tensor_refs());
  if (!c.freeze.empty()) fields["freeze"] = join(c.freeze);
  if (!c.adapter.empty()) {
    const io::PeftAdapter a = io::load_peft_adapter(c.adapter);
    std::vector<io::TensorRef> refs;
    for (const auto& [name, t] : a.tensors) refs.push_back(io::tensor_ref(name, t));
    fields["adapter"] = io::tensors_digest(refs);
  }
  if (c.lora) {
    io::PeftLoraConfig p = peft_config(c);
    p.base_model_name_or_path.clear();  // where the base lies may change; its digest may not
    fields["lora"] = io::peft_config_json(p).dump();
  }
}

void prepare_finetune(const Config& c, nn::models::LlamaForCausalLM& model) {
  try {
    if (!c.freeze.empty()) nn::freeze(model, c.freeze);
    if (c.lora && !c.adapter.empty()) {
      // PEFT's from_pretrained(is_trainable=True): every target is adapted and trained; one the
      // file holds no tensors for starts as a fresh adapter does.
      apply_peft_adapter(model, io::load_peft_adapter(c.adapter),
                         random::fold_in(random::key(c.common.seed), kLoraStream));
    } else if (c.lora) {
      nn::add_lora(model, *c.lora, random::fold_in(random::key(c.common.seed), kLoraStream));
    }
  } catch (const Error& e) {
    fail("{}: {}", c.name, e.what());
  }
}

train::FitOptions::CheckpointFormat lora_format(const Config& c) {
  return recipes::lora_format(peft_config(c), c.name);
}

void add_adapter(LoadedDir& d, const std::string& dir, const std::string& adapter_dir) {
  const io::PeftAdapter adapter = io::load_peft_adapter(adapter_dir);
  io::Checkpoint state = io::load_peft_checkpoint(adapter, true);
  check_adapter_base(state, io::tensors_digest(io::HfModelDir::open(dir).tensor_refs()), dir,
                     adapter_dir);
  apply_peft_adapter(*d.model, adapter);
  d.model->eval();  // inference: lora_dropout off
  if (state.user.count("context")) {
    state.params.clear();
    d.state = std::move(state);
    d.context = std::min(field_int(d.state, "context", adapter_dir),
                         d.model->config().max_position_embeddings);
  }
}

void merge_adapter(const std::string& dir, const std::string& adapter_dir, const std::string& out,
                   std::FILE* log) {
  const std::string what = "merge: " + out;
  std::error_code ec;
  for (const std::string* in : {&dir, &adapter_dir})
    if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(out, *in, ec))
      fail("{} is {}: write the merged model to a folder of its own", what, *in);
  io::check_output_model_dir(out, what);
  const std::string state = io::training_state_path(io::folder_name(out, what));
  struct stat st {};
  if (::stat(state.c_str(), &st) == 0)
    fail(
        "{}: {} is beside it, the training state of the model there, which the merged model would "
        "not match; remove it or write elsewhere",
        what, state);
  const io::PeftAdapter adapter = io::load_peft_adapter(adapter_dir);
  io::HfModelDir base = io::HfModelDir::open(dir);
  check_adapter_base(io::load_peft_checkpoint(adapter, true),
                     io::tensors_digest(base.tensor_refs()), dir, adapter_dir);
  LoadedDir d = load_dir(dir, false);
  apply_peft_adapter(*d.model, adapter);
  const size_t adapted = nn::lora_modules(*d.model).size();
  const io::NamedArrays tensors = merged_parameters(*d.model, what);
  nlohmann::json config = base.config();
  // The merge is computed in f32 / f64 and stored as F32; "dtype" is the newer key's spelling.
  if (config.contains("dtype")) config["dtype"] = "float32";
  if (config.contains("torch_dtype") || !config.contains("dtype"))
    config["torch_dtype"] = "float32";
  io::HfSaveOptions opt;
  opt.what = what;
  opt.files = base.other_files();
  for (const char* kept : io::kHfKeptFiles)  // OUT keeps no tokenizer file of another model
    if (!opt.files.count(kept)) opt.dropped.insert(kept);
  io::save_hf_dir(out, config, tensors, opt);
  fmt::print(log, "{}", merge_line(adapted, adapter.config, adapter_dir, dir, out));
}

}  // namespace tlaloc::recipes::llama
