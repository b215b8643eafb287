// How well a causal language model predicts a token stream: the evaluation behind the final
// validation of `tlaloc train llama` and `tlaloc eval` (Llama directories and `train lm`
// checkpoints alike), so both print the same figure for the same stream.
//
// The stream's tokens 1 .. n-1 are each predicted exactly once, from the tokens before them in
// non-overlapping windows of `context` tokens: window w feeds tokens [w·context, w·context +
// context) and is scored on the next token at each position; the last window may be partial
// (padded with token 0 after the stream's end, the padding unscored: the attention is causal,
// so it changes nothing before it; a stream shorter than one window is run as one window of its
// own length, the same predictions). Token 0 of the stream (the recipes put BOS there) is
// context only. Windows are run in chunks of at most kScoreTokens tokens and kScoreLogits
// logits (64 MiB of f32: a large vocabulary gets smaller chunks), the chunks' sums
// (f32, in the program) added in f64 in order: the host lane gives the same bits on every run
// and thread count.
#pragma once

#include <cstdint>
#include <string>

#include "tlaloc/core/array.h"
#include "tlaloc/nn/module.h"

namespace tlaloc::recipes {

inline constexpr int64_t kScoreTokens = 4096;
inline constexpr int64_t kScoreLogits = int64_t(1) << 24;

// A cross-entropy total over `tokens` predictions of a text of `bytes` bytes.
struct TextScore {
  double nats = 0;     // sum of -ln p(token) over the predicted tokens
  int64_t tokens = 0;  // predicted tokens
  int64_t bytes = 0;   // the text's bytes (UTF-8), what bits per byte divide by
  double nats_per_token() const { return nats / double(tokens); }
  double perplexity() const;  // exp(nats per token)
  // nats / ln 2 / bytes: comparable across tokenizers (a byte-level model's bits per token).
  double bits_per_byte() const;
};

// The score of model(tokens [batch, context] s32) -> logits [batch, context, vocab] (a CausalLM,
// a LlamaForCausalLM, any such Module, its parameters' current values) on `stream` (s32 [n], n
// >= 2, ids below the vocabulary), a text of `bytes` bytes, windows as described above,
// compiled for the host lane with `num_threads` (0: OpenMP's default). Throws tlaloc::Error for
// n < 2, context < 1, a window whose logits alone would take more than half the machine's
// memory, or a non-finite total.
TextScore score_stream(nn::Module& model, const Array& stream, int64_t context, int64_t bytes,
                       int num_threads = 0);

// The token unigram baseline: counts of the ids of `train` (s32, in [0, vocab)), add-one
// smoothed over `vocab` ids, scored on tokens 1 .. n-1 of `stream` (the predictions
// score_stream makes), a text of `bytes` bytes. Throws for an id outside [0, vocab).
TextScore unigram_score(const Array& train, int64_t vocab, const Array& stream, int64_t bytes);

// "5.1234 nats/token, perplexity 168.03, 1.6543 bits/byte (999 tokens, 4567 bytes)".
std::string format_score(const TextScore& s);

}  // namespace tlaloc::recipes
