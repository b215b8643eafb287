// PEFT LoRA adapter directories (peft.h): adapter_config.json and adapter_model.safetensors.
#include "tlaloc/io/peft.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "tlaloc/io/atomic_dir.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/json_util.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/io/write_lock.h"

namespace tlaloc::io {

using json = nlohmann::json;

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

// Keys that describe the adapter without changing what it computes.
// qalora_group_size is read only with use_qalora, which is refused when on.
const std::set<std::string> kDescriptive = {"qalora_group_size", "base_model_name_or_path",
                                            "revision",          "task_type",
                                            "inference_mode",    "init_lora_weights",
                                            "auto_mapping",      "megatron_core",
                                            "loftq_config",      "eva_config",
                                            "corda_config",      "runtime_config",
                                            "peft_version"};
// Keys read into PeftLoraConfig or checked one by one below.
const std::set<std::string> kRead = {
    "peft_type",      "r",        "lora_alpha",          "lora_dropout",  "use_rslora",
    "target_modules", "use_dora", "rank_pattern",        "alpha_pattern", "modules_to_save",
    "fan_in_fan_out", "bias",     "layers_to_transform", "layers_pattern"};

// null, false, "", [] or {}: an option left off.
bool is_off(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_string() && v.empty()) ||
         ((v.is_array() || v.is_object()) && v.empty());
}

bool is_adapter_name(const std::string& n) {
  return n.ends_with(".lora_A.weight") || n.ends_with(".lora_B.weight");
}

std::string module_of(const std::string& n) {
  return n.substr(0, n.size() - std::strlen(".lora_A.weight"));
}

}  // namespace

json peft_config_json(const PeftLoraConfig& c) {
  // PEFT's lora_alpha is an int; a whole value is written as one.
  const json alpha = c.lora_alpha == std::floor(c.lora_alpha) && std::fabs(c.lora_alpha) < 1e15
                         ? json(int64_t(c.lora_alpha))
                         : json(c.lora_alpha);
  json targets = c.target_modules.size() == 1 && c.target_modules[0] == "all-linear"
                     ? json("all-linear")
                     : json(c.target_modules);
  return {{"alpha_pattern", json::object()},
          {"auto_mapping", nullptr},
          {"base_model_name_or_path", c.base_model_name_or_path},
          {"bias", "none"},
          {"fan_in_fan_out", false},
          {"inference_mode", true},
          {"init_lora_weights", true},
          {"layers_pattern", nullptr},
          {"layers_to_transform", nullptr},
          {"lora_alpha", alpha},
          {"lora_dropout", c.lora_dropout},
          {"modules_to_save", nullptr},
          {"peft_type", "LORA"},
          {"r", c.r},
          {"rank_pattern", json::object()},
          {"revision", nullptr},
          {"target_modules", targets},
          {"task_type", c.task_type},
          {"use_dora", false},
          {"use_rslora", c.use_rslora}};
}

PeftLoraConfig peft_config_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) fail("{}: holds {}, not a JSON object", where, json_kind(j));
  PeftLoraConfig c;
  const std::string type = j.contains("peft_type") && j["peft_type"].is_string()
                               ? j["peft_type"].get<std::string>()
                               : std::string("(missing)");
  if (type != "LORA")
    fail("{}: peft_type '{}' is not implemented (tlaloc reads LORA adapters)", where, type);
  for (const char* off : {"use_dora", "rank_pattern", "alpha_pattern", "modules_to_save",
                          "fan_in_fan_out", "layers_to_transform", "layers_pattern"})
    if (j.contains(off) && !is_off(j[off]))
      fail("{}: {} = {} is a PEFT option tlaloc does not implement{}", where, off, j[off].dump(),
           std::string(off) == "use_dora" ? " (DoRA)" : "");
  if (j.contains("bias") && !(j["bias"].is_string() && j["bias"] == "none"))
    fail("{}: bias = {} (bias training) is not implemented; tlaloc reads bias \"none\"", where,
         j["bias"].dump());
  for (const auto& [k, v] : j.items())
    if (!kRead.count(k) && !kDescriptive.count(k) && !is_off(v))
      fail("{}: {} = {} is a PEFT option tlaloc does not implement", where, k, v.dump());
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1)
    fail("{}: r must be a positive integer, got {}", where, j.value("r", json()).dump());
  c.r = j["r"].get<int64_t>();
  if (j.contains("lora_alpha")) {
    if (!j["lora_alpha"].is_number() || !std::isfinite(j["lora_alpha"].get<double>()))
      fail("{}: lora_alpha must be a number, got {}", where, j["lora_alpha"].dump());
    c.lora_alpha = j["lora_alpha"].get<double>();
  }
  if (j.contains("lora_dropout")) {
    const json& d = j["lora_dropout"];
    if (!d.is_number() || !(d.get<double>() >= 0 && d.get<double>() < 1))
      fail("{}: lora_dropout must be a number in [0, 1), got {}", where, d.dump());
    c.lora_dropout = d.get<double>();
  }
  if (j.contains("use_rslora")) {
    if (!j["use_rslora"].is_boolean())
      fail("{}: use_rslora must be true or false, got {}", where, j["use_rslora"].dump());
    c.use_rslora = j["use_rslora"].get<bool>();
  }
  const json t = j.value("target_modules", json());
  if (t.is_string()) {
    if (t != "all-linear")
      fail(
          "{}: target_modules {} is a regular expression, which tlaloc does not implement; give a "
          "list of module names",
          where, t.dump());
    c.target_modules = {"all-linear"};
  } else if (t.is_array() && !t.empty()) {
    c.target_modules.clear();
    for (const auto& e : t) {
      if (!e.is_string() || e.get<std::string>().empty())
        fail("{}: target_modules holds {}, not a module name", where, e.dump());
      c.target_modules.push_back(e.get<std::string>());
    }
  } else {
    fail("{}: target_modules must be a non-empty list of module names or \"all-linear\", got {}",
         where, t.dump());
  }
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
    c.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  if (j.contains("task_type") && j["task_type"].is_string())
    c.task_type = j["task_type"].get<std::string>();
  return c;
}

PeftAdapter load_peft_adapter(const std::string& dir_in) {
  PeftAdapter a;
  a.path = folder_name(dir_in, "adapter directory");
  const std::string& d = a.path;
  struct stat st {};
  if (::stat(d.c_str(), &st) != 0)
    fail("{}: cannot open the adapter directory: {}", d, std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) fail("{}: not a folder (a PEFT adapter directory is one)", d);
  const std::string cfg = d + "/" + kConfigFile, weights = d + "/" + kWeightsFile;
  if (::stat(cfg.c_str(), &st) != 0) fail("{}: missing (a PEFT adapter directory has one)", cfg);
  a.config = peft_config_from_json(read_json_object(cfg, "adapter config", 16), cfg);
  if (::stat(weights.c_str(), &st) != 0)
    fail("{}: missing{}", weights,
         ::stat((d + "/adapter_model.bin").c_str(), &st) == 0
             ? " (adapter_model.bin is not read: save the adapter as safetensors)"
             : "");
  SafetensorsFile f = SafetensorsFile::open(weights);
  NamedArrays raw = to_arrays(f.tensors(), weights);
  if (raw.empty()) fail("{}: holds no tensors", weights);
  std::map<std::string, std::pair<const Array*, const Array*>> modules;  // A, B
  const std::string prefix = kPeftPrefix;
  for (const auto& [name, t] : raw) {
    if (!name.starts_with(prefix) || !is_adapter_name(name))
      fail("{}: tensor '{}' is not a LoRA tensor ({}<module>.lora_A.weight or .lora_B.weight)",
           weights, name, prefix);
    const std::string local = name.substr(prefix.size());
    auto& slot = modules[module_of(local)];
    (local.ends_with(".lora_A.weight") ? slot.first : slot.second) = &t;
    if (t.shape().rank() != 2)
      fail("{}: tensor '{}' is {}, not a matrix", weights, name, describe(t));
  }
  for (const auto& [m, ab] : modules) {
    if (!ab.first || !ab.second)
      fail("{}: module '{}' has lora_{} but no lora_{}", weights, m, ab.first ? "A" : "B",
           ab.first ? "B" : "A");
    if (ab.first->shape()[0] != a.config.r || ab.second->shape()[1] != a.config.r)
      fail(
          "{}: module '{}': lora_A is {} and lora_B {}, the config's r is {} (A [r, in], B [out, "
          "r])",
          weights, m, describe(*ab.first), describe(*ab.second), a.config.r);
  }
  for (auto& [name, t] : raw) a.tensors.emplace_back(name.substr(prefix.size()), std::move(t));
  return a;
}

void check_output_adapter_dir(const std::string& dir, const std::string& what) {
  check_output_folder(
      dir, what, "PEFT adapter directory",
      [](const std::string& n) {
        return n == kConfigFile || n == kWeightsFile || n == "README.md";
      },
      "adapter_config.json, adapter_model.safetensors, README.md");
}

void save_peft_checkpoint(const std::string& dir_in, const PeftLoraConfig& config,
                          const Checkpoint& ckpt, const std::string& what) {
  const std::string dir = folder_name(dir_in, what);
  const std::string state = training_state_path(dir);
  check_output_adapter_dir(dir, what);
  check_output_file(state, what);
  std::vector<TensorRef> refs;
  for (const auto& [name, a] : ckpt.params) {
    if (!is_adapter_name(name))
      fail("{} {}: '{}' is not a LoRA tensor (<module>.lora_A.weight or .lora_B.weight)", what, dir,
           name);
    refs.push_back(tensor_ref(kPeftPrefix + name, a));
  }
  const std::string digest = tensors_digest(refs);
  SerializedHeader header;
  try {
    header = serialize_header(std::move(refs), {{"format", "pt"}});
  } catch (const Error& e) {
    fail("{} {}: {}", what, dir, e.what());
  }
  const WriteLock lock(dir, what);  // one writer of the pair
  {
    AtomicDir out(dir, what);
    check_output_adapter_dir(dir, what);  // again, now that no other tlaloc run can write it
    write_safetensors(out.file(kWeightsFile), header);
    const std::string text = hf_json_text(peft_config_json(config));
    AtomicFile f(out.file(kConfigFile));
    f.write(std::as_bytes(std::span<const char>(text.data(), text.size())));
    f.commit();
    out.commit();
  }
  save_training_state(state, ckpt, digest);
}

Checkpoint load_peft_checkpoint(const PeftAdapter& adapter, bool training_state) {
  const std::string state = training_state_path(adapter.path);
  Checkpoint c;
  struct stat st {};
  if (training_state && ::stat(state.c_str(), &st) == 0) {
    std::vector<TensorRef> refs;
    for (const auto& [name, a] : adapter.tensors) refs.push_back(tensor_ref(kPeftPrefix + name, a));
    c = load_training_state(state, adapter.path, tensors_digest(refs), "adapter tensors");
  }
  c.params = adapter.tensors;
  c.source = adapter.path;
  return c;
}

}  // namespace tlaloc::io
