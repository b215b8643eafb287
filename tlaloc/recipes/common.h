// What the recipes (tlaloc/recipes: disc, fmnist, lm, llama) share: the options of every
// `tlaloc train` recipe, the lane choice and the train::fit options made from them.
//
// A recipe is a reusable training job: its model, data inputs (by name) and loss, plus a
// run(Config) that trains with train::fit and prints its report to Common::out. `tlaloc train
// <recipe>` only parses flags into the Config and calls run().
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tlaloc/runtime/executable.h"
#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/train/fit.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::recipes {

struct Common {
  uint64_t seed = 20260921;           // every random draw (data, init, shuffles)
  int64_t log_every = 50;             // read the loss every N batches
  int threads = 0;                    // host lane threads (0: OpenMP's default)
  std::string schedule = "constant";  // optim::parse_schedule's names
  int64_t warmup = 0;                 // linear warm-up steps
  train::Lane lane = train::Lane::host;
  DType precision = DType::f32;  // compute type of dots (TrainerOptions::precision)
  // pjrt lane: dot_general's precision_config (DEFAULT: XLA may use TF32; HIGHEST: full f32).
  stablehlo::Precision matmul_precision = stablehlo::Precision::DEFAULT;
  bool deterministic = false;  // pjrt lane: xla_gpu_deterministic_ops
  // pjrt lane: the check against the host lane before training (train/cross_check.h).
  train::CrossCheckMode cross_check = train::CrossCheckMode::warn;
  int zero = 0;  // under mpirun: ZeRO stage (1: optimizer state sharded over the processes)
  std::optional<bool> flat_state;  // TrainerOptions::flat_state (unset: the lane's default)
  // Checkpoints and metrics (train::FitOptions of the same names).
  std::optional<std::string> save, resume;
  int64_t save_every = 0, stop_after = 0;
  double minutes = 0;  // > 0: a time budget (train::FitOptions::time_limit_seconds / 60)
  std::string metrics;
  std::string plot;  // training curves (PNG) at every save point and at the end
  std::FILE* out = stdout;
};

// Resolves c.lane (train::choose_lane: auto takes pjrt when a plugin and a device are found),
// prints the lane's one line to c.out and returns trainer options for it (lane, --precision,
// --deterministic, threads). Throws tlaloc::Error with that line when pjrt cannot start.
train::TrainerOptions trainer_options(const Common& c);

// fit options of a run named `name` ("train fmnist") of `steps` steps whose checkpoints carry
// `metadata` (its "recipe" field names the recipe; all are checked on resume).
train::FitOptions fit_options(const Common& c, std::string name, int64_t steps,
                              std::map<std::string, std::string> metadata);

// Checks the checkpoint and metrics options (train::check) and takes the --save lock
// (train::lock_outputs) before any work is done; the recipe holds the lock until it returns.
[[nodiscard]] io::WriteLock check_options(const Common& c, const std::string& name);

// Checks, before any work, a picture the recipe writes besides fit's outputs (`flag`, e.g.
// "--confusion", at `path`; empty: none): io::check_output_file, and not the file of --save,
// --resume, --metrics or --plot. Throws tlaloc::Error "<name>: <flag> ...".
void check_picture_output(const Common& c, const std::string& name, const std::string& flag,
                          const std::string& path);

// The lr schedule of a run of `steps` steps (optim::parse_schedule of c.schedule and
// `warmup`), refusing a warm-up that is not shorter than the run (with the constant schedule
// the lr would never reach its value: the run would train next to nothing).
optim::Schedule make_schedule(const Common& c, const std::string& name, int64_t steps,
                              int64_t warmup);

// Throws tlaloc::Error "<what>: a model of N parameters needs about X GiB (B bytes each), more
// than this machine's Y GiB of memory" when parameters · bytes_per_parameter exceeds the
// physical memory (sysconf), so such sizes fail at once instead of in the OOM killer.
void check_fits_in_memory(double parameters, double bytes_per_parameter, const std::string& what);

// This machine's physical memory in bytes (sysconf; 0 when unknown).
double physical_memory_bytes();

// Throws tlaloc::Error "<what>: a step of --batch B x --context C tokens needs at least X GiB
// ..." when a causal LM's step cannot fit whatever the planner does: each process's tokens
// (batch / processes x context) times what the backward pass must keep of them (their f32
// logits, and per layer the two norms' inputs and the MLP's hidden activation, in `precision`:
// bf16 / f16 halve them), exceed the physical memory. A lower bound: it refuses no step that
// would fit.
void check_step_fits_in_memory(int64_t batch, int64_t context, int64_t vocab, int64_t layers,
                               int64_t d_model, int64_t d_ff, DType precision,
                               const std::string& what);
// f(), with a runtime::OutOfMemory (the lane could not hold the program's buffers) rethrown as
// "<what>: <its message>: a step of --batch B x --context C tokens does not fit ...".
template <typename F>
decltype(auto) naming_step_size(const std::string& what, int64_t batch, int64_t context, F&& f) {
  try {
    return f();
  } catch (const runtime::OutOfMemory& e) {
    fail(
        "{}: {}: a step of --batch {} x --context {} tokens does not fit in this machine's "
        "memory; lower --batch or --context",
        what, e.what(), batch, context);
  }
}

// "crc32:XXXXXXXX:BYTES" (zlib's crc32 and the length): what a training state records of its
// text or tokenizer, so that a resume or `eval` can tell when it changed.
std::string bytes_digest(std::string_view bytes);

}  // namespace tlaloc::recipes
