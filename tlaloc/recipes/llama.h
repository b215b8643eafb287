// The Llama recipe: `tlaloc train llama` trains a LlamaForCausalLM (nn/models/llama.h) on text
// with a SentencePiece tokenizer and writes a HuggingFace model directory; `tlaloc eval` and
// `tlaloc sample` read such directories back (load_dir).
//
// The job (run): the model from --preset (llama_presets.h), --config (a config.json) or --init
// (an HF directory: its config and weights); the tokenizer from --tokenizer, the --init
// directory's tokenizer.model, or trained (BPE of the model's vocab_size, deterministic) on the
// training text; the text from --text or the default corpus (llama_data.h: the King James Bible
// and the fortunes files), its last val_fraction held out at a line start; one resident s32
// token stream (llama_data.h's streams: BOS per document, a newline piece per line end), random
// windows of `context` tokens per step gathered in the program (lm::loss_fn: mean next-token
// cross-entropy), AdamW in the step, through train::fit. At the end: the held-out stream scored
// by text_score.h (nats per token, perplexity, bits per byte) beside the token unigram baseline
// in the same units.
//
// The output DIR (default llama-<preset>) is an HF model directory: config.json (to_json of the
// model's LlamaConfig), model.safetensors, tokenizer.model, generation_config.json (bos / eos
// ids); the training state (optimizer moments, step, seed, and the run's fields: recipe, context,
// batch, text, val_fraction) is DIR.training.safetensors beside it (io/hf_dir.h), which --resume
// DIR continues bitwise and from which `tlaloc eval DIR` re-derives the held-out text.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/io/hf_dir.h"
#include "tlaloc/nn/lora.h"
#include "tlaloc/nn/models/llama.h"
#include "tlaloc/recipes/common.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/recipes/llama_data.h"
#include "tlaloc/recipes/llama_presets.h"
#include "tlaloc/recipes/text_score.h"
#include "tlaloc/text/tokenizer.h"

namespace tlaloc::recipes::llama {

struct Config {
  Common common;            // common.save unset: "llama-<preset>" ("llama-model" otherwise)
  std::string preset;       // "" and no config_json / init: "tiny"
  std::string config_json;  // a HF config.json (llama_config_from_json)
  std::string init;         // an HF model directory to start from
  std::optional<int64_t> context, batch;  // unset: the preset's (small's for config / init)
  std::string tokenizer;          // a .model or a folder holding tokenizer.model; "": see above
  std::vector<std::string> text;  // "": the default corpus
  int64_t steps = 2000;
  double lr = 1e-3, wd = 0.1, val_fraction = 0.1;
  // Fine-tuning (`tlaloc finetune`, needs init): parameters frozen by glob (nn::freeze), and / or
  // LoRA adapters (nn::add_lora, drawn from the seed), which freeze the whole base model; with
  // lora the output is a PEFT adapter directory (io/peft.h) instead of a model directory.
  std::vector<std::string> freeze;
  std::optional<nn::LoraConfig> lora;
  std::string adapter;  // with lora: start from this PEFT adapter's weights (its config in lora)
  std::string name = "train llama";  // the command, in messages and the run's metadata
};

// Parameters of LlamaForCausalLM(m), counted without building it (double: absurd sizes do not
// overflow): embed_tokens, per layer q / k / v / o projections (biases with attention_bias),
// the SwiGLU MLP (biases with mlp_bias) and two norms, the final norm, lm_head unless tied.
double parameter_count(const nn::models::LlamaConfig& m);

// `tlaloc train llama`. Every input is checked before anything is written (no output folder
// is created or changed by a failed run): tlaloc::Error one line naming the option, file or
// key, for a config.json key or value tlaloc does not implement, a model too large for this
// machine's memory (parameter_count · 16 bytes), an --init directory that is
// not one (missing shard, tensor of another shape or dtype than the config's model, ...), a
// tokenizer whose vocabulary is larger than the model's vocab_size, a context above
// max_position_embeddings, too little text; then fit's errors (resume, divergence, I/O).
train::FitResult run(const Config& c);

// A Llama directory read back: the model (f32 parameters, as stored), its tokenizer (from
// DIR/tokenizer.model) and, when DIR.training.safetensors is present, the run's fields.
struct LoadedDir {
  std::unique_ptr<nn::models::LlamaForCausalLM> model;
  std::optional<text::Tokenizer> tokenizer;
  io::Checkpoint state;  // parameters dropped; step 0 and no user fields without the file
  int64_t context = 0;   // the training context, else max_position_embeddings
  // Where generation ends (HF generate's eos_token_id): generation_config.json's eos_token_id
  // when the file has the key (an id, a list, or null: none), else config.json's.
  std::vector<int32_t> eos;
  // generation_config.json's sampling keys, when it sets them (HF generate's defaults for this
  // model): do_sample false means greedy; temperature, top_k, top_p as HF's logits warpers.
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
};
// Throws naming DIR and the key / tensor / file (hf_dir.h's refusals, config keys, tensors of
// another name, shape or dtype, NaN / inf parameters, a tokenizer larger than vocab_size).
LoadedDir load_dir(const std::string& dir, bool need_tokenizer = true);

// `tlaloc eval|sample DIR --adapter ADAPTER`: the PEFT adapter directory ADAPTER (written by
// tlaloc or by PEFT) added to d's model (apply_adapter); when ADAPTER.training.safetensors is
// there, d.state and d.context become its run's (`finetune`'s held-out text and context).
// Throws as load_peft_adapter and apply_adapter do.
// `dir` is d's directory: an adapter whose training state names another base model (its
// base_model digest) is refused.
void add_adapter(LoadedDir& d, const std::string& dir, const std::string& adapter);

// The sampling of `tlaloc sample` for d, as HF generate takes it: generation_config.json's keys
// where set (do_sample false: greedy), except those given on the command line (`flags`, whose
// given_* say which were). Appends to `taken` a phrase per key taken from the file.
struct SamplingFlags {
  lm::SampleOptions options;
  bool given_temperature = false, given_top_k = false, given_top_p = false;
};
lm::SampleOptions sampling_options(const LoadedDir& d, const SamplingFlags& flags,
                                   std::vector<std::string>& taken);

// `tlaloc merge`: the model of `dir` with the PEFT adapter `adapter` folded in (W + scaling · B A
// computed in f64, stored as F32; merged_lora_weights) written as the model directory `out`
// with dir's config (torch_dtype float32), generation config and tokenizer files. One line to
// `log`. Throws, writing nothing, for load_dir's and load_peft_adapter's refusals, an adapter
// module the model lacks or of another shape, and an `out` that is `dir` or `adapter`.
void merge_adapter(const std::string& dir, const std::string& adapter, const std::string& out,
                   std::FILE* log);

// The held-out documents of the run that wrote `state` (its fields text and val_fraction):
// the default corpus or the files, split as run() splits them. Throws when the state has no
// such fields (not written by train llama).
std::vector<Document> held_out_documents(const io::Checkpoint& state, const std::string& dir);

// The text of `docs` scored by the model of `d` (windows of d.context): the figure run()
// prints as its validation for the held-out documents.
TextScore score_documents(LoadedDir& d, const std::vector<Document>& docs, int threads = 0);

}  // namespace tlaloc::recipes::llama
