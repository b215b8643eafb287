// The byte-level causal language model recipe (vocab 256). The token stream is resident on the
// lane; a step draws the start offsets of its windows (s32 [batch]) from its step index and
// gathers tokens[start .. start + context] inside the program, so nothing goes up per step
// (sampled_loss_fn; loss_fn takes the starts as an input, for evaluation). Loss: mean
// next-byte cross-entropy (nats).
// `tlaloc train lm` is run(); `tlaloc sample` generates from its checkpoints (generate.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tlaloc/nn/lora.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/recipes/common.h"
#include "tlaloc/train/step_bench.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::recipes::lm {

// The benchmark model: 2 layers, d_model 128, 4 heads, MLP 512 (GELU), LayerNorm with biases,
// vocab 256, context 16, untied head.
nn::CausalLMConfig bench_config();
inline constexpr int64_t kBenchBatch = 4;
// AdamW lr 3e-3, weight decay 0.01 (the benchmark's optimizer).
optim::AdamW bench_optimizer();

// Data inputs: "tokens" s32 [n_tokens] (resident), "starts" s32 [batch], and with dropout_key
// a per-step "dropout_key" u32[2] (see dropout_key()).
std::vector<train::DataInput> data_inputs(int64_t n_tokens, int64_t batch,
                                          bool dropout_key = false);
// Mean cross-entropy of model(tokens[s : s+context]) against tokens[s+1 : s+context+1] over
// the windows starting at `starts` (each start must be <= n_tokens - context - 1; larger ones
// are clamped by the gather). With a "dropout_key" data input the model is captured in
// training mode with that key bound (Module::bind_key); without, in eval mode.
train::LossFn loss_fn(int64_t context);
// The dropout key of step `step`: fold_in(split(key(seed), 2)[1], step) as u32[2] key data, so
// a resumed run draws the same masks.
Array dropout_key(uint64_t seed, int64_t step);

// The train step with its data drawn in the program, as `train lm`, `train llama` and the
// benchmarks run it: "tokens" s32 [n_tokens] (resident) and the step index "step"
// (DataInput::step_index), so nothing goes up per step; with procs > 1 (0:
// distributed::world()'s size) "rank", the s32 scalar naming this process (resident: each
// process, or each replica of an exported step, is given its own).
std::vector<train::DataInput> sampled_inputs(int64_t n_tokens, int procs = 0);
// loss_fn on `batch` windows starting at random_starts(seed, step, batch, n_tokens, context),
// drawn in the program from the step index, the host's bits (random/program.h); under data
// parallelism this process's rows of them (rank r of N: rows [r·batch/N, (r+1)·batch/N); N:
// `procs`, or distributed::world_size() when procs is 0; r: the "rank" input). `dropout`:
// training mode under dropout_key(seed, step) (folded with r under data parallelism), drawn
// there too. Throws tlaloc::Error when batch does not split over the processes or n_tokens <=
// context.
train::LossFn sampled_loss_fn(int64_t context, uint64_t seed, int64_t batch, int64_t n_tokens,
                              bool dropout, int procs = 0);

// The benchmark model's train step (init from `seed`), for export, tests and `bench step`: its
// batch drawn in the program from the step index (sampled_loss_fn, data seed 1).
// `replicas` > 1: one process's step of data parallelism over that many (the batch split).
// `precision`: the dots' compute type (train::TrainerOptions::precision); `flat_state`: the
// optimizer state in buckets (optim::UpdateOptions::flat_state, the pjrt lane's default).
optim::TrainStep bench_train_step(int64_t n_tokens = 4096, uint64_t seed = 20260921,
                                  int replicas = 1, DType precision = DType::f32,
                                  bool flat_state = false);

// Parameters of nn::CausalLM(c), counted without building it (double: absurd sizes do not
// overflow): tok_emb, pos_emb; per block two norms (weight, plus bias for layernorm), q/k/v/out
// projections with biases (k, v: kv_heads * d_model / heads outputs), MLP with biases; ln_f;
// the untied head (no bias). 0 when a size is not positive (CausalLM refuses those).
double parameter_count(const nn::CausalLMConfig& c);
// Throws tlaloc::Error "<what>: a model of N parameters needs about X GiB (B bytes each), more
// than this machine's Y GiB of memory" when parameter_count(c) * bytes_per_parameter exceeds
// the physical memory (sysconf), so such sizes fail at once instead of in the OOM killer.
void check_fits_in_memory(const nn::CausalLMConfig& c, double bytes_per_parameter,
                          const std::string& what);

// Bytes of the files, concatenated, as s32 tokens. Throws tlaloc::Error naming a file that
// cannot be read (missing, a folder, a device such as /dev/zero), or when the total is empty.
Array read_corpus(const std::vector<std::string>& files);
// The English fortunes files of Debian's `fortunes` package: regular files directly in
// /usr/share/games/fortunes without a .dat / .u8 suffix, sorted by name.
std::vector<std::string> default_corpus(const std::string& dir = "/usr/share/games/fortunes");
// Cross-entropy in bits per byte of the unigram (byte frequency) model of `train` on `eval`,
// add-one smoothed.
double unigram_bits_per_byte(const Array& train, const Array& eval);
// `count` window starts drawn uniformly from [0, n_tokens - context - 1] by `key`.
Array random_starts(uint64_t seed, int64_t step, int64_t count, int64_t n_tokens, int64_t context);

// `tlaloc train lm`: the model `model` trained on `text` (default_corpus() when empty), its
// last val_fraction held out, `steps` steps of `batch` random windows (AdamW lr, wd) through
// train::fit; then the validation loss on val_windows evenly spaced windows against the unigram
// baseline, printed to common.out. Sizes, dropout and the memory a model needs are checked
// before the corpus is read. Throws tlaloc::Error for those, unreadable text, a non-finite
// training or validation loss (nothing saved) and fit's errors.
struct Config {
  Config() { common.save = "lm.safetensors"; }
  Common common;
  std::vector<std::string> text;
  nn::CausalLMConfig model = bench_config();
  int64_t batch = kBenchBatch;
  int64_t steps = 2000;
  double lr = 3e-3, wd = 0.01, val_fraction = 0.1;
  int64_t val_windows = 512;
  // Fine-tuning (`tlaloc finetune CKPT`): start from this `train lm` checkpoint's model (its
  // sizes replace `model`'s), with parameters frozen by glob (nn::freeze) and / or LoRA adapters
  // (nn::add_lora; the output is then a PEFT adapter directory, io/peft.h).
  std::string init;
  std::vector<std::string> freeze;
  std::optional<nn::LoraConfig> lora;
  std::string name = "train lm";  // the command, in messages
};
train::FitResult run(const Config& c);

// `tlaloc bench step --model lm`: the benchmark model's step on 4096 resident random bytes.
train::StepBenchCase bench_case(int threads);

}  // namespace tlaloc::recipes::lm
