// HuggingFace model directories, both ways: the folder `transformers`' save_pretrained writes and
// from_pretrained reads.
//
//   DIR/config.json                    the model's configuration (a JSON object; kept as is: the
//                                      model code interprets the keys)
//   DIR/generation_config.json         optional
//   DIR/model.safetensors              the weights, one file (safetensors metadata
//                                      {"format": "pt"}), or, sharded:
//   DIR/model.safetensors.index.json   {"metadata": {"total_size": BYTES}, "weight_map":
//                                      {tensor: shard file}}
//   DIR/model-00001-of-00003.safetensors ...
//   DIR/tokenizer.model                optional (SentencePiece); other tokenizer files may sit
//                                      beside it (kHfKeptFiles)
//
// Tensors keep HF's names, dtypes and bytes exactly: nothing is converted on the way in or out,
// so HF directory -> tlaloc -> HF directory is bitwise identical in every tensor.
//
// Training state (optimizer moments, step, seed, data position) never goes inside DIR, which
// stays a plain HF directory: it is the checkpoint file DIR.training.safetensors beside it
// (training_state_path), tied to DIR's weights by a digest of them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

// save_pretrained's default max_shard_size ("5GB").
inline constexpr uint64_t kHfMaxShardBytes = 5'000'000'000;

// Files other than the weights and config.json that a model directory may hold; a save keeps
// those it is not given (hard links into the new folder). Any other entry makes a folder "not a
// model directory", which tlaloc does not write into.
inline constexpr const char* kHfKeptFiles[] = {"generation_config.json",  "tokenizer.model",
                                               "tokenizer.json",          "tokenizer_config.json",
                                               "special_tokens_map.json", "added_tokens.json"};

// "model-00001-of-00003.safetensors" (1-based `index`, five digits as HF writes them).
std::string hf_shard_name(int index, int count);

// A model directory opened for reading: the weights are mmapped views (valid while it lives).
class HfModelDir {
 public:
  // Reads DIR. Throws one tlaloc::Error line naming the file, shard or tensor for: DIR missing
  // or not a folder; config.json missing, not JSON or not an object (generation_config.json
  // likewise, when present); no model.safetensors and no model.safetensors.index.json, or both;
  // an index that is not JSON, has no "weight_map" object, maps a tensor to something other than
  // a plain file name, or names a tensor twice; a shard it lists that is missing; a tensor the
  // index maps to a shard that lacks it; a shard tensor the index does not map there (so a tensor
  // in two shards is refused); any safetensors refusal of a weight file (truncated, garbage, ...).
  static HfModelDir open(const std::string& dir);

  const std::string& path() const { return path_; }
  const nlohmann::json& config() const { return config_; }
  const std::optional<nlohmann::json>& generation_config() const { return generation_config_; }
  // DIR/tokenizer.model when present.
  const std::optional<std::string>& tokenizer_model() const { return tokenizer_model_; }
  // The files of kHfKeptFiles DIR holds: name -> path (for HfSaveOptions::files).
  const std::map<std::string, std::string>& other_files() const { return other_files_; }
  bool sharded() const { return sharded_; }
  // The weight files: {"model.safetensors"} or the shards in name order.
  std::vector<std::string> weight_files() const;

  // Every tensor of every weight file, sorted by name.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* find(std::string_view name) const;
  // Throws naming DIR and the tensor when absent.
  const TensorView& at(std::string_view name) const;
  // As at(), also refusing another dtype: "DIR: tensor 'x' (model-00001-of-00002.safetensors)
  // is BF16, expected F32".
  const TensorView& at(std::string_view name, StDType required) const;
  // The weight file holding `name` (throws as at()).
  const std::string& file_of(std::string_view name) const;
  // The tensors as they are stored, for writing back (views into this object).
  std::vector<TensorRef> tensor_refs() const;

 private:
  HfModelDir() = default;
  size_t index_of(std::string_view name) const;

  std::string path_;
  nlohmann::json config_;
  std::optional<nlohmann::json> generation_config_;
  std::optional<std::string> tokenizer_model_;
  std::map<std::string, std::string> other_files_;
  bool sharded_ = false;
  std::vector<SafetensorsFile> files_;
  std::vector<TensorView> tensors_;
  std::vector<size_t> file_of_;  // per tensor: its index in files_
};

struct HfSaveOptions {
  // Shards of at most this many bytes of tensor data, HF's rule: in the order given, a tensor
  // that would take the current shard past it starts a new one, a tensor larger than it gets a
  // shard of its own. One shard is written as model.safetensors, without an index.
  uint64_t max_shard_bytes = kHfMaxShardBytes;
  // Written (hf_json_text) when set; otherwise an existing DIR/generation_config.json is kept.
  std::optional<nlohmann::json> generation_config;
  // Files copied in: a name of kHfKeptFiles (e.g. "tokenizer.model") -> the file to copy. The
  // kept files of a previous DIR not named here (nor generation_config.json, when
  // generation_config is set) are kept.
  std::map<std::string, std::string> files;
  // Kept files of a previous DIR left out (e.g. a saver that writes tokenizer.model drops the
  // tokenizer.json of another tokenizer, which HF's AutoTokenizer would read first).
  std::set<std::string> dropped;
  // Starts every error message (e.g. "train llama: --save").
  std::string what = "save";
  SaveOptions save;
};

// Checks, before any work, that `dir` can be written as a model directory: a name of its own,
// its parent a writable folder, and `dir` absent, empty or a model directory (only regular
// files: config.json, the weight files, kHfKeptFiles). Throws one tlaloc::Error line starting
// with `what` and naming the path (and, for an occupied folder, the first foreign entry).
void check_output_model_dir(const std::string& dir, const std::string& what);

// Writes DIR as a model directory: config.json (hf_json_text: keys sorted, indent 2), the
// weights (one file or shards + index), generation_config.json and the `files` when given, the
// kept files of a previous DIR; stale weight files of a previous save are gone. The whole
// folder is replaced at once (atomic_dir.h: the previous DIR or the complete new one, whatever
// happens), under io::WriteLock on DIR. Throws (nothing written) for: a `config` that is not an
// object, a name used twice, anything safetensors refuses, check_output_model_dir's refusals,
// `max_shard_bytes` 0, a `files` name not in kHfKeptFiles or whose file is not a readable regular
// file, generation_config.json given both ways; I/O failures name the file.
void save_hf_dir(const std::string& dir, const nlohmann::json& config,
                 std::vector<TensorRef> tensors, const HfSaveOptions& options = {});
void save_hf_dir(const std::string& dir, const nlohmann::json& config, const NamedArrays& tensors,
                 const HfSaveOptions& options = {});

// ---- training state beside the model directory ----

// "DIR.training.safetensors" (DIR without trailing slashes).
std::string training_state_path(const std::string& dir);
// For `--resume DIR`: throws "--resume DIR: no training state beside it (DIR.training.safetensors),
// so there is no run to continue; <instead>" when that file is absent.
void require_training_state(const std::string& dir, std::string_view instead);

// A digest of tensors (names, dtypes, shapes, bytes; order-independent): "crc32:XXXXXXXX:BYTES".
std::string tensors_digest(const std::vector<TensorRef>& tensors);

// The training state file `state` (no parameters in it) of the folder `dir`, whose tensors'
// digest is `digest`. Throws naming the file when it holds parameters or its model_digest is
// not `digest` ("was saved with other <what> than DIR holds ...").
Checkpoint load_training_state(const std::string& state, const std::string& dir,
                               const std::string& digest, const std::string& what);

// Writes ckpt.params as the model directory DIR (save_hf_dir) and everything else (optimizer
// state, step, seed, data position, skipped steps, hyper-parameters, user fields, and
// model_digest: the digest of the parameters) as the checkpoint DIR.training.safetensors
// (save_checkpoint, no parameters). Checks both outputs before writing either.
void save_hf_checkpoint(const std::string& dir, const nlohmann::json& config,
                        const Checkpoint& ckpt, const HfSaveOptions& options = {});

// DIR's tensors as ckpt.params (dtypes as stored; tensors of dtypes tlaloc lacks are refused by
// name) with ckpt.source = DIR. With `training_state` and DIR.training.safetensors present, the
// rest of the checkpoint comes from that file, which must hold no parameters and whose
// model_digest must be DIR's ("... was saved with other weights than DIR holds ..."). Without
// the file (or with `training_state` false) the checkpoint is parameters only, step 0.
Checkpoint load_hf_checkpoint(const HfModelDir& model, bool training_state = true);

}  // namespace tlaloc::io
