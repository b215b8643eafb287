#include "tlaloc/recipes/text_score.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tlaloc/nn/losses.h"
#include "tlaloc/recipes/common.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::recipes {

double TextScore::perplexity() const { return std::exp(nats_per_token()); }

double TextScore::bits_per_byte() const { return nats / std::log(2.0) / double(bytes); }

TextScore score_stream(nn::Module& model, const Array& stream, int64_t context, int64_t bytes,
                       int num_threads) {
  const int64_t n = stream.numel();
  if (n < 2) fail("score: a stream of {} tokens has nothing to predict (2 or more needed)", n);
  if (context < 1) fail("score: context {} must be >= 1", context);
  const int64_t windows = (n - 1 + context - 1) / context;  // every target in exactly one
  // One window: as long as the stream (the same predictions: the padding is after them).
  if (windows == 1) context = n - 1;
  auto named = model.named_parameters();
  const bool was_training = model.training();
  model.eval();
  // The vocabulary, from the logits' type of one window (a capture only, nothing runs).
  int64_t vocab = 0;
  {
    std::vector<ir::TensorType> types{{DType::s32, Shape{1, context}}};
    for (auto& p : named) types.push_back({p.param->value.dtype(), p.param->value.shape()});
    trace::capture(
        [&](std::span<const trace::Tensor> in) {
          model.bind(in.subspan(1));
          trace::Tensor logits = model(in[0]);
          vocab = logits.dim(2);
          return std::vector<trace::Tensor>{logits};
        },
        types);
  }
  // A window's logits are its least memory; a context too long for them fails here, by name.
  const double logit_bytes = double(context) * double(vocab) * 4.0;
  const double have = physical_memory_bytes();
  if (have > 0 && 2 * logit_bytes > have)
    fail(
        "score: a window of {} tokens needs about {:.1f} GiB for its logits alone ({} per token), "
        "more than half this machine's {:.1f} GiB of memory: score with a shorter --context",
        context, logit_bytes / 1073741824.0, vocab, have / 1073741824.0);
  const int64_t tokens = std::min(kScoreTokens, kScoreLogits / std::max<int64_t>(vocab, 1));
  const int64_t batch = std::min(windows, std::max<int64_t>(1, tokens / context));
  std::vector<ir::TensorType> types{{DType::s32, Shape{batch, context + 1}},
                                    {DType::f32, Shape{batch, context}}};
  for (auto& p : named) types.push_back({p.param->value.dtype(), p.param->value.shape()});
  ir::Function f = trace::capture(
      [&](std::span<const trace::Tensor> in) {
        model.bind(in.subspan(2));
        trace::Tensor x = trace::slice(in[0], 1, 0, context);
        trace::Tensor y = trace::reshape(trace::slice(in[0], 1, 1, context + 1), {batch * context});
        trace::Tensor logits = model(x);
        trace::Tensor flat = trace::reshape(logits, {batch * context, logits.dim(2)});
        trace::Tensor rows = nn::cross_entropy_per_row(flat, y);
        trace::Tensor w = trace::reshape(in[1], {batch * context});
        if (rows.dtype() != DType::f32) w = trace::astype(w, rows.dtype());
        return std::vector<trace::Tensor>{trace::sum(rows * w)};
      },
      types);
  model.train(was_training);
  auto exe = runtime::host::compile(f, {.num_threads = num_threads});
  std::vector<Array> inputs;
  inputs.emplace_back(DType::s32, Shape{batch, context + 1});
  inputs.emplace_back(DType::f32, Shape{batch, context});
  for (auto& p : named) inputs.push_back(p.param->value);
  const int32_t* s = stream.data<int32_t>();
  TextScore r;
  r.bytes = bytes;
  for (int64_t w0 = 0; w0 < windows; w0 += batch) {
    int32_t* tok = inputs[0].data<int32_t>();
    float* wt = inputs[1].data<float>();
    std::fill(tok, tok + batch * (context + 1), 0);
    std::fill(wt, wt + batch * context, 0.0f);
    for (int64_t b = 0; b < batch && w0 + b < windows; ++b) {
      const int64_t start = (w0 + b) * context;
      const int64_t len = std::min(context + 1, n - start);  // tokens of the stream in it
      std::copy(s + start, s + start + len, tok + b * (context + 1));
      std::fill(wt + b * context, wt + b * context + (len - 1), 1.0f);
      r.tokens += len - 1;
    }
    r.nats += exe->run(inputs)[0].at(0);
  }
  if (!std::isfinite(r.nats))
    fail("score: the loss over {} tokens is {} (the model's parameters hold NaN or inf?)", r.tokens,
         r.nats);
  return r;
}

TextScore unigram_score(const Array& train, int64_t vocab, const Array& stream, int64_t bytes) {
  std::vector<double> count(size_t(vocab), 1.0);
  auto id = [vocab](int32_t t, const char* where) {
    if (t < 0 || t >= vocab)
      fail("unigram: {} token {} is outside the vocabulary [0, {})", where, t, vocab);
    return size_t(t);
  };
  const int32_t* t = train.data<int32_t>();
  for (int64_t i = 0; i < train.numel(); ++i) count[id(t[i], "training")] += 1;
  const double total = double(train.numel()) + double(vocab);
  TextScore r;
  r.bytes = bytes;
  const int32_t* e = stream.data<int32_t>();
  for (int64_t i = 1; i < stream.numel(); ++i)
    r.nats -= std::log(count[id(e[i], "scored")] / total);
  r.tokens = std::max<int64_t>(stream.numel() - 1, 0);
  return r;
}

std::string format_score(const TextScore& s) {
  return fmt::format("{:.4f} nats/token, perplexity {:.2f}, {:.4f} bits/byte ({} tokens, {} bytes)",
                     s.nats_per_token(), s.perplexity(), s.bits_per_byte(), s.tokens, s.bytes);
}

}  // namespace tlaloc::recipes
