// Text generation with a byte-level CausalLM or a Llama model (tlaloc sample): the model read back
// from a `tlaloc train lm` checkpoint, a Decoder that runs the compiled KV-cache decode step
// (nn/kv_cache.h) on the host lane, and sampling on the host with threefry keys.
//
// Past the model's context the window slides: once the cache holds `context` tokens, the next
// token restarts the cache and re-feeds the last context - 1 tokens before it (recomputed), so
// every prediction sees exactly the last min(n, context) tokens, as forward() on that window.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/random/key.h"
#include "tlaloc/runtime/executable.h"

namespace tlaloc::recipes::lm {

// Model sizes from the metadata of a `tlaloc train lm` checkpoint (user.recipe = "lm",
// user.layers, d_model, heads, kv_heads, context, d_ff; tied when there is no head.weight).
// Throws tlaloc::Error naming the file and the missing / malformed field, or another recipe.
nn::CausalLMConfig config_from_checkpoint(const io::Checkpoint& c);
// The model of config_from_checkpoint(c) with its parameters restored (strictly: names,
// dtypes and shapes must match, else tlaloc::Error listing each difference). A parameter
// holding NaN or inf (a diverged or damaged file) is a tlaloc::Error naming it, and so are
// sizes whose model would not fit in memory (lm::check_fits_in_memory, before allocating).
std::unique_ptr<nn::CausalLM> load_model(const io::Checkpoint& c);

// Runs the decode step of one sequence (batch 1), compiled once for the host lane. Holds a copy
// of the model's parameters (their values at construction) and the k/v caches, donated to
// each step so they are updated in place. Any nn::CachedDecoder: the byte-level CausalLM
// (window: its context) or a LlamaForCausalLM (window: the context it was trained at).
class Decoder {
 public:
  explicit Decoder(nn::CausalLM& model, int num_threads = 1);
  // `context`: the window (and cache) length in tokens, in [1, model.max_positions()].
  Decoder(nn::CachedDecoder& model, int64_t context, int num_threads = 1);
  ~Decoder();
  // Appends `token` (0 <= token < vocab, else tlaloc::Error) and returns the logits f32
  // [vocab] for the next token given the last min(n, context) tokens (the window slides; see
  // the top of this file).
  std::vector<float> push(int32_t token);
  // Forgets every token.
  void reset();
  // Tokens in the current window (<= context).
  int64_t window() const { return int64_t(window_.size()); }
  // Decode steps run so far (re-fed tokens included).
  int64_t steps_run() const { return steps_; }
  int64_t vocab() const { return vocab_; }
  int64_t context() const { return context_; }

 private:
  std::vector<float> run(int32_t token, int32_t pos);
  int64_t vocab_ = 0, context_ = 0;
  std::unique_ptr<runtime::Executable> exe_;
  std::vector<Array> inputs_;  // token, pos, caches (donated), parameters
  std::vector<int32_t> window_;
  int64_t steps_ = 0;
};

struct SampleOptions {
  double temperature = 1.0;  // 0: greedy (argmax); finite > 0: softmax(logits / temperature)
  int64_t top_k = 0;         // keep the k largest logits (0 or >= vocab: all)
  // Nucleus sampling (Holtzman et al. 2020; HF's TopPLogitsWarper): keep the most likely tokens
  // whose probabilities (after temperature and top_k) sum to at least top_p. 1: all.
  double top_p = 1.0;
  uint64_t seed = 20260921;  // keys: random::key(seed), split once per generated token
  // > 0: only ids below it are drawn (the logits past it are dropped first): a tokenizer with
  // fewer pieces than the model's vocabulary.
  int64_t vocab = 0;
  // End-of-sequence ids: generation stops once one is drawn (it is the last token returned),
  // as HF generate's eos_token_id. Empty: it runs for all n tokens.
  std::vector<int32_t> eos = {};
};

// One token from `logits` [vocab]: temperature 0 -> the first index of the largest logit;
// otherwise jax.random.categorical(key, logits / temperature) with every logit outside the
// top_k largest set to -inf (ties at the k-th value broken by lower index), then, for top_p < 1,
// every token HF's TopPLogitsWarper drops: sorted from least to most likely, those whose
// cumulative probability is <= 1 - top_p (the most likely always kept). When a tiny
// temperature would overflow f32, (logits - max) / temperature is used instead (the same
// softmax). Throws tlaloc::Error for empty logits, a NaN or +inf logit, temperature < 0,
// NaN or inf, top_k < 0, top_p outside (0, 1].
int32_t sample_token(std::span<const float> logits, const SampleOptions& o, random::Key key);

// Feeds `prompt` (non-empty, tokens in [0, vocab); only its last `context` tokens matter, so
// only those are fed) to a reset decoder and generates `n` (>= 0) tokens: token i is
// sample_token(logits, o, k_i), where (key, k_i) = random::split<2>(key) per token from
// key = random::key(o.seed), stopping early after an o.eos token. Returns the generated tokens
// only; `on_token`, when set, is also
// called with each token as soon as it is drawn (to stream long outputs). Throws tlaloc::Error
// for an empty prompt, a token outside the vocabulary, n < 0 or bad options.
std::vector<int32_t> generate(Decoder& d, std::span<const int32_t> prompt, int64_t n,
                              const SampleOptions& o,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace tlaloc::recipes::lm
