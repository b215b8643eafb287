// Writing a HuggingFace model directory (hf_dir.h) as save_pretrained lays it out, the whole
// folder replaced at once (atomic_dir.h), and the training state beside it.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tlaloc/io/atomic_dir.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/json_util.h"

namespace tlaloc::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::map<std::string, std::string> kHfMetadata = {{"format", "pt"}};

// "model-DDDDD-of-DDDDD.safetensors".
bool is_shard_name(const std::string& n) {
  const std::string pattern = "model-#####-of-#####.safetensors";
  if (n.size() != pattern.size()) return false;
  for (size_t i = 0; i < n.size(); ++i)
    if (pattern[i] == '#' ? !std::isdigit(static_cast<unsigned char>(n[i])) : n[i] != pattern[i])
      return false;
  return true;
}

bool is_model_dir_file(const std::string& n) {
  if (n == "config.json" || n == "model.safetensors" || n == "model.safetensors.index.json" ||
      is_shard_name(n))
    return true;
  return std::find(std::begin(kHfKeptFiles), std::end(kHfKeptFiles), n) != std::end(kHfKeptFiles);
}

// HF's split (huggingface_hub split_state_dict_into_shards_factory): in order, a tensor over
// the limit gets a shard of its own, one that would take the current shard past it closes it.
std::vector<std::vector<TensorRef>> plan_shards(std::vector<TensorRef> tensors, uint64_t max) {
  std::vector<std::vector<TensorRef>> shards;
  std::vector<TensorRef> current;
  uint64_t size = 0;
  for (TensorRef& t : tensors) {
    const uint64_t n = t.data.size();
    if (n > max) {
      shards.push_back({std::move(t)});
      continue;
    }
    if (size + n > max && !current.empty()) {
      shards.push_back(std::move(current));
      current.clear();
      size = 0;
    }
    current.push_back(std::move(t));
    size += n;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  return shards;
}

void write_text(const std::string& path, const std::string& text, const SaveOptions& options) {
  AtomicFile f(path, options);
  f.write(std::as_bytes(std::span<const char>(text.data(), text.size())));
  f.commit();
}

void require_object(const json& j, const std::string& what, const std::string& dir,
                    const char* file) {
  if (!j.is_object())
    fail("{} {}: the {} to write is {}, not a JSON object", what, dir, file, json_kind(j));
}

}  // namespace

void check_output_model_dir(const std::string& dir, const std::string& what) {
  check_output_folder(dir, what, "model directory", is_model_dir_file,
                      "config.json, generation_config.json, model*.safetensors, "
                      "model.safetensors.index.json, tokenizer files");
}

void save_hf_dir(const std::string& dir_in, const json& config, std::vector<TensorRef> tensors,
                 const HfSaveOptions& opt) {
  const std::string& what = opt.what;
  const std::string dir = folder_name(dir_in, what);
  // Everything checked before anything is written.
  require_object(config, what, dir, "config.json");
  if (opt.generation_config)
    require_object(*opt.generation_config, what, dir, "generation_config.json");
  if (opt.max_shard_bytes == 0) fail("{} {}: max_shard_bytes is 0", what, dir);
  for (const auto& [name, source] : opt.files) {
    if (std::find(std::begin(kHfKeptFiles), std::end(kHfKeptFiles), name) == std::end(kHfKeptFiles))
      fail("{} {}: '{}' is not a file a model directory keeps beside the weights", what, dir, name);
    if (name == "generation_config.json" && opt.generation_config)
      fail("{} {}: generation_config.json given both as JSON and as the file {}", what, dir,
           source);
    struct stat st {};
    if (::stat(source.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        ::access(source.c_str(), R_OK) != 0)
      fail("{} {}: {} (for {}) is not a readable file", what, dir, source, name);
  }
  {
    std::vector<std::string> names;
    for (const TensorRef& t : tensors) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    auto twice = std::adjacent_find(names.begin(), names.end());
    if (twice != names.end()) fail("{} {}: two tensors are named '{}'", what, dir, *twice);
  }
  uint64_t total = 0;
  for (const TensorRef& t : tensors) total += t.data.size();
  std::vector<std::vector<TensorRef>> shards = plan_shards(std::move(tensors), opt.max_shard_bytes);
  const int count = int(shards.size());
  if (count > 99999) fail("{} {}: {} shards, over HF's 99999", what, dir, count);
  std::vector<std::pair<std::string, SerializedHeader>> files;
  json weight_map = json::object();
  for (int i = 0; i < count; ++i) {
    std::string name = count == 1 ? "model.safetensors" : hf_shard_name(i + 1, count);
    for (const TensorRef& t : shards[size_t(i)]) weight_map[t.name] = name;
    try {
      files.emplace_back(name, serialize_header(std::move(shards[size_t(i)]), kHfMetadata));
    } catch (const Error& e) {
      fail("{} {}: {}", what, dir, e.what());
    }
  }
  check_output_model_dir(dir, what);

  AtomicDir out(dir, what, opt.save);
  check_output_model_dir(dir, what);  // again, now that no other tlaloc run can write it
  for (const auto& [name, header] : files) write_safetensors(out.file(name), header, opt.save);
  if (count > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", std::move(weight_map)}};
    write_text(out.file("model.safetensors.index.json"), hf_json_text(index), opt.save);
  }
  write_text(out.file("config.json"), hf_json_text(config), opt.save);
  if (opt.generation_config)
    write_text(out.file("generation_config.json"), hf_json_text(*opt.generation_config), opt.save);
  for (const auto& [name, source] : opt.files) out.add_existing(name, source, /*may_link=*/false);
  for (const char* kept : kHfKeptFiles) {
    const std::string k = kept, old = dir + "/" + k;
    if ((k == "generation_config.json" && opt.generation_config) || opt.files.count(k) ||
        opt.dropped.count(k))
      continue;
    struct stat st {};
    if (::stat(old.c_str(), &st) == 0) out.add_existing(k, old, /*may_link=*/true);
  }
  out.commit();
}

void save_hf_dir(const std::string& dir, const json& config, const NamedArrays& tensors,
                 const HfSaveOptions& options) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const auto& [name, a] : tensors) refs.push_back(tensor_ref(name, a));
  save_hf_dir(dir, config, std::move(refs), options);
}

// ---- training state ----

std::string training_state_path(const std::string& dir) {
  return folder_name(dir, "model directory") + ".training.safetensors";
}

void require_training_state(const std::string& dir, std::string_view instead) {
  struct stat st {};
  if (::stat(training_state_path(dir).c_str(), &st) != 0)
    fail("--resume {}: no training state beside it ({}), so there is no run to continue; {}", dir,
         training_state_path(dir), instead);
}

std::string tensors_digest(const std::vector<TensorRef>& tensors) {
  std::vector<const TensorRef*> sorted;
  for (const TensorRef& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorRef* a, const TensorRef* b) { return a->name < b->name; });
  uLong crc = crc32_z(0, nullptr, 0);
  uint64_t bytes = 0;
  for (const TensorRef* t : sorted) {
    std::string head = t->name + '\0' + std::string(st_name(t->dtype)) + '[';
    for (int64_t d : t->shape) head += std::to_string(d) + ',';
    head += ']';
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(head.data()), head.size());
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(t->data.data()), t->data.size());
    bytes += t->data.size();
  }
  return fmt::format("crc32:{:08x}:{}", crc, bytes);
}

void save_hf_checkpoint(const std::string& dir_in, const json& config, const Checkpoint& ckpt,
                        const HfSaveOptions& options) {
  const std::string dir = folder_name(dir_in, options.what);
  const std::string state = training_state_path(dir);
  check_output_model_dir(dir, options.what);
  check_output_file(state, options.what);
  std::vector<TensorRef> refs;
  for (const auto& [name, a] : ckpt.params) refs.push_back(tensor_ref(name, a));
  const WriteLock lock(dir, options.what);  // one writer of the pair
  const std::string digest = tensors_digest(refs);
  save_hf_dir(dir, config, std::move(refs), options);
  save_training_state(state, ckpt, digest, options.save);
}

Checkpoint load_training_state(const std::string& state, const std::string& dir,
                               const std::string& digest, const std::string& what) {
  Checkpoint c = load_checkpoint(state);
  if (!c.params.empty())
    fail("{}: holds tensors that are not optimizer state (e.g. '{}'): not a training state file",
         state, c.params[0].first);
  if (c.model_digest != digest)
    fail(
        "{}: was saved with other {} than {} holds (model digest {}, the folder's {}): a save "
        "stopped between the two, or the folder was replaced; remove {} to start afresh from the "
        "folder's {}",
        state, what, dir, c.model_digest.empty() ? "absent" : c.model_digest, digest, state, what);
  return c;
}

Checkpoint load_hf_checkpoint(const HfModelDir& model, bool training_state) {
  const std::string state = training_state_path(model.path());
  Checkpoint c;
  struct stat st {};
  if (training_state && ::stat(state.c_str(), &st) == 0)
    c = load_training_state(state, model.path(), tensors_digest(model.tensor_refs()), "weights");
  c.params = to_arrays(model.tensors(), model.path());
  c.source = model.path();
  return c;
}

}  // namespace tlaloc::io
