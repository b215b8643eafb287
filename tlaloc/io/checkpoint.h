// Checkpoints: a plain safetensors file holding parameters under their dotted names
// ("0.weight", "blocks.0.attn.q_proj.weight"), the optimizer's state arrays under names the
// caller picks ("optimizer.exp_avg.0.weight"), and string metadata. Restoring follows
// PyTorch's load_state_dict(strict=True) contract: names, dtypes and shapes must match
// exactly; nothing in the file is executed. Independent of nn / optim types.
//
// Metadata keys written: "tlaloc.checkpoint" ("1"), "tlaloc.version" (TLALOC_VERSION), "step"
// (decimal integer), "seed" and "data_position" (decimal, when set), "skipped_steps" (decimal,
// when not 0: steps whose update was skipped for a non-finite gradient), "optimizer" (kind),
// "optimizer.<hyper-parameter>" (e.g. "optimizer.lr"), "optimizer_state" (JSON list of the
// state tensors' names), "model_digest" (when set: the training state of a model kept
// elsewhere, hf_dir.h), "user.<field>".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

using NamedArrays = std::vector<std::pair<std::string, Array>>;

struct Checkpoint {
  NamedArrays params;
  NamedArrays optimizer_state;
  // Optimizer kind ("adam", "adamw", "sgd", ...); empty for a parameters-only file.
  std::string optimizer;
  // PyTorch / Optax names -> values; format floats with exact() so they round-trip.
  std::map<std::string, std::string> hyper_parameters;
  int64_t step = 0;  // optimizer steps taken; stored as a decimal string, exact to 2^63-1
  // Of those, the steps whose update was skipped (a non-finite gradient): the optimizer's own
  // count of applied updates is step - skipped_steps. Written only when not 0.
  int64_t skipped_steps = 0;
  std::optional<uint64_t> seed;
  std::optional<int64_t> data_position;  // e.g. samples consumed so far
  std::map<std::string, std::string> user;
  // For training state saved apart from its parameters (hf_dir.h: beside a model directory):
  // the digest of the parameters it belongs with; empty otherwise.
  std::string model_digest;
  std::string tlaloc_version;  // set by load_checkpoint (the writer's version)
  std::string source;          // set by load_checkpoint: the file, for error messages

  bool has_optimizer_state() const { return !optimizer.empty(); }
};

// Shortest decimal that parses back to exactly `v` (fmt's "{}" formatting).
std::string exact(double v);
// Parses a whole string as a double; throws tlaloc::Error naming `what` otherwise.
double parse_double(const std::string& s, const std::string& what);

// Saves atomically (atomic_file.h). Throws tlaloc::Error for: optimizer state without an
// optimizer kind, a name used twice (parameters and state share one namespace), metadata keys
// or names safetensors refuses, I/O failures.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt,
                     const SaveOptions& options = {});

// As save_checkpoint, without the parameters: the training state of a model whose parameters
// are kept elsewhere (hf_dir.h). The file holds ckpt.optimizer_state and the metadata, its
// model_digest `model_digest` (ckpt.model_digest is not used).
void save_training_state(const std::string& path, const Checkpoint& ckpt,
                         const std::string& model_digest, const SaveOptions& options = {});

// Copies views into Arrays (to_array). Throws one tlaloc::Error "<src>: tensors of dtypes tlaloc
// lacks: 'a' (I64), ..." listing them all, or naming `src` and the tensor for to_array's other
// refusals.
NamedArrays to_arrays(const std::vector<TensorView>& views, const std::string& src);

// Loads every tensor into Arrays. Throws tlaloc::Error naming the file and field for: any
// safetensors refusal, tensors of dtypes tlaloc lacks (all listed), a malformed "step",
// "seed", "data_position" or "skipped_steps", an "optimizer_state" list naming absent tensors. A
// file without tlaloc metadata loads as parameters only, step 0.
Checkpoint load_checkpoint(const std::string& path);

// check_output_file(path, what, replace), and refuses (one line starting with `what`) a file
// that exists, is not empty and is not a tlaloc checkpoint (a safetensors file whose metadata
// holds tlaloc.checkpoint): replacing a dataset, a text, a picture or another program's weights
// would destroy a file that is not ours.
void check_checkpoint_output(const std::string& path, const std::string& what);

// What a model (or optimizer) built afresh expects.
struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
};

// The arrays of `expected`, in its order. Throws one tlaloc::Error listing every missing name,
// every unexpected name and every dtype/shape mismatch ("'0.weight': file f32[16,2], expected
// f32[2,16]").
std::vector<Array> restore_params(const Checkpoint& ckpt, const std::vector<TensorSpec>& expected);
// As restore_params for the optimizer state; a parameters-only checkpoint is refused with the
// names asked for.
std::vector<Array> restore_optimizer_state(const Checkpoint& ckpt,
                                           const std::vector<TensorSpec>& expected);

// ---- checkpoint folders: DIR/ckpt-000100.safetensors, one file per step ----

// "DIR/ckpt-%06d.safetensors"; throws for a negative step.
std::string checkpoint_path(const std::string& dir, int64_t step);
// Completed checkpoints in `dir` as (step, path), ascending by step; temporaries are ignored.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);
// The highest-step checkpoint, or nullopt when there is none (or no folder).
std::optional<std::string> latest_checkpoint(const std::string& dir);
// Saves ckpt at checkpoint_path(dir, ckpt.step) (creating `dir`), then deletes all but the
// newest `keep_last` checkpoints (0 keeps all) and temporaries left by killed saves (one
// writer per folder). Returns the path written.
std::string save_checkpoint_in(const std::string& dir, const Checkpoint& ckpt, int keep_last = 0,
                               const SaveOptions& options = {});

}  // namespace tlaloc::io
