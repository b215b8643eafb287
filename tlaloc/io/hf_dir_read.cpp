// Reading a HuggingFace model directory (hf_dir.h): config.json, the weights of model.safetensors
// or of the shards model.safetensors.index.json lists, generation_config.json, tokenizer.model.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "tlaloc/io/atomic_dir.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/io/json_util.h"

namespace tlaloc::io {

using json = nlohmann::json;

namespace {

// Nesting allowed in config.json / generation_config.json, and in the index.
constexpr int kMaxConfigDepth = 64, kMaxIndexDepth = 8;

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

std::string hf_shard_name(int index, int count) {
  if (index < 1 || index > count || count > 99999)
    fail("shard {} of {}: out of range (1 <= index <= count <= 99999)", index, count);
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

HfModelDir HfModelDir::open(const std::string& dir) {
  HfModelDir d;
  d.path_ = folder_name(dir, "model directory");
  const std::string& p = d.path_;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0)
    fail("{}: cannot open the model directory: {}", p, std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) fail("{}: not a folder (a model directory is one)", p);

  const std::string config = p + "/config.json";
  if (!exists(config)) fail("{}: missing (a HuggingFace model directory has one)", config);
  d.config_ = read_json_object(config, "config", kMaxConfigDepth);
  const std::string gen = p + "/generation_config.json";
  if (exists(gen))
    d.generation_config_ = read_json_object(gen, "generation config", kMaxConfigDepth);
  for (const char* name : kHfKeptFiles)
    if (is_file(p + "/" + name)) d.other_files_[name] = p + "/" + name;
  if (d.other_files_.count("tokenizer.model")) d.tokenizer_model_ = p + "/tokenizer.model";

  const std::string single = p + "/model.safetensors", index = p + "/model.safetensors.index.json";
  const bool has_single = exists(single), has_index = exists(index);
  if (has_single && has_index)
    fail("{}: holds both model.safetensors and model.safetensors.index.json; remove the stale one",
         p);
  if (!has_single && !has_index)
    fail("{}: no model.safetensors or model.safetensors.index.json{}", p,
         exists(p + "/pytorch_model.bin") || exists(p + "/pytorch_model.bin.index.json")
             ? " (pytorch_model.bin weights are not read: convert them to safetensors)"
             : "");

  if (has_single) {
    d.files_.push_back(SafetensorsFile::open(single));
    d.tensors_ = d.files_[0].tensors();
    d.file_of_.assign(d.tensors_.size(), 0);
    return d;
  }

  d.sharded_ = true;
  const json idx = read_json_object(index, "index", kMaxIndexDepth);
  auto wm = idx.find("weight_map");
  if (wm == idx.end() || !wm->is_object())
    fail("{}: has no \"weight_map\" object (tensor -> shard file)", index);
  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> tensors
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string() || !plain_file_name(shard.get_ref<const std::string&>()))
      fail("{}: tensor '{}' is mapped to {}, not a file name in the folder", index, tensor,
           shard.dump());
    by_shard[shard.get<std::string>()].push_back(tensor);
  }
  for (const auto& [shard, names] : by_shard) {
    const std::string sp = p + "/" + shard;
    if (!exists(sp))
      fail("{}: shard '{}' is missing ({} tensors, e.g. '{}')", index, shard, names.size(),
           names[0]);
    d.files_.push_back(SafetensorsFile::open(sp));
    const SafetensorsFile& f = d.files_.back();
    for (const std::string& n : names)
      if (!f.find(n)) fail("{}: maps tensor '{}' to shard '{}', which lacks it", index, n, shard);
  }
  for (size_t i = 0; i < d.files_.size(); ++i) {
    const std::string shard = base_name(d.files_[i].source());
    for (const TensorView& v : d.files_[i].tensors()) {
      auto it = wm->find(v.name);
      if (it == wm->end())
        fail("{}: shard '{}' holds tensor '{}', which the index does not list", index, shard,
             v.name);
      if (it->get_ref<const std::string&>() != shard)
        fail("{}: tensor '{}' is in shard '{}' and in shard '{}' (the index maps it to the latter)",
             index, v.name, shard, it->get<std::string>());
      d.tensors_.push_back(v);
      d.file_of_.push_back(i);
    }
  }
  std::vector<size_t> order(d.tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return d.tensors_[a].name < d.tensors_[b].name; });
  std::vector<TensorView> tensors;
  std::vector<size_t> file_of;
  for (size_t i : order) {
    tensors.push_back(std::move(d.tensors_[i]));
    file_of.push_back(d.file_of_[i]);
  }
  d.tensors_ = std::move(tensors);
  d.file_of_ = std::move(file_of);
  return d;
}

std::vector<std::string> HfModelDir::weight_files() const {
  std::vector<std::string> r;
  for (const SafetensorsFile& f : files_) r.push_back(base_name(f.source()));
  return r;
}

size_t HfModelDir::index_of(std::string_view name) const {
  const TensorView* v = find(name);
  if (!v)
    fail("{}: no tensor named '{}' (the model directory holds {} tensors)", path_, name,
         tensors_.size());
  return size_t(v - tensors_.data());
}

const TensorView* HfModelDir::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& v, std::string_view n) { return v.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorView& HfModelDir::at(std::string_view name) const { return tensors_[index_of(name)]; }

const TensorView& HfModelDir::at(std::string_view name, StDType required) const {
  const size_t i = index_of(name);
  const TensorView& v = tensors_[i];
  if (v.dtype != required)
    fail("{}: tensor '{}' ({}) is {}, expected {}", path_, name,
         base_name(files_[file_of_[i]].source()), st_name(v.dtype), st_name(required));
  return v;
}

const std::string& HfModelDir::file_of(std::string_view name) const {
  return files_[file_of_[index_of(name)]].source();
}

std::vector<TensorRef> HfModelDir::tensor_refs() const {
  std::vector<TensorRef> r;
  r.reserve(tensors_.size());
  for (const TensorView& v : tensors_) r.push_back({v.name, v.dtype, v.shape, v.data});
  return r;
}

}  // namespace tlaloc::io
