#include "tlaloc/recipes/generate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "tlaloc/random/random.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/checkpointing.h"

namespace tlaloc::recipes::lm {

namespace {

int64_t positive_field(const io::Checkpoint& c, const std::string& key) {
  auto it = c.user.find(key);
  if (it == c.user.end())
    fail("{}: metadata user.{} is missing (not written by `tlaloc train lm`?)", c.source, key);
  const std::string& s = it->second;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0)
    fail("{}: metadata user.{} is '{}', not a positive integer", c.source, key, s);
  return v;
}

bool has_param(const io::Checkpoint& c, const std::string& name) {
  return std::any_of(c.params.begin(), c.params.end(),
                     [&](const auto& p) { return p.first == name; });
}

}  // namespace

nn::CausalLMConfig config_from_checkpoint(const io::Checkpoint& c) {
  auto recipe = c.user.find("recipe");
  if (recipe == c.user.end() || recipe->second != "lm")
    fail("{}: not a `tlaloc train lm` checkpoint (metadata user.recipe is {})", c.source,
         recipe == c.user.end() ? "missing" : "'" + recipe->second + "'");
  nn::CausalLMConfig m;
  m.layers = positive_field(c, "layers");
  m.d_model = positive_field(c, "d_model");
  m.heads = positive_field(c, "heads");
  m.kv_heads = positive_field(c, "kv_heads");
  m.context = positive_field(c, "context");
  m.d_ff = positive_field(c, "d_ff");
  auto tied = c.user.find("tied");
  if (tied != c.user.end() && tied->second != "true" && tied->second != "false")
    fail("{}: metadata user.tied is '{}', not true or false", c.source, tied->second);
  m.tied = tied != c.user.end() ? tied->second == "true" : !has_param(c, "head.weight");
  // Block choices (written since train lm has --norm / --gelu; older checkpoints have the
  // defaults).
  auto choice = [&](const char* key, std::string& field, const char* a, const char* b) {
    auto it = c.user.find(key);
    if (it == c.user.end()) return;
    if (it->second != a && it->second != b)
      fail("{}: metadata user.{} is '{}', not {} or {}", c.source, key, it->second, a, b);
    field = it->second;
  };
  choice("norm", m.norm, "layernorm", "rmsnorm");
  choice("gelu", m.gelu, "tanh", "none");
  return m;
}

std::unique_ptr<nn::CausalLM> load_model(const io::Checkpoint& c) {
  nn::CausalLMConfig config = config_from_checkpoint(c);
  check_fits_in_memory(config, 8, c.source);  // the model and the decoder's copy, f32
  auto model = std::make_unique<nn::CausalLM>(config);
  train::restore_model(*model, c);
  train::require_finite(c.params, c.source, "parameter");
  return model;
}

Decoder::Decoder(nn::CausalLM& model, int num_threads)
    : Decoder(static_cast<nn::CachedDecoder&>(model), model.config().context, num_threads) {}

Decoder::Decoder(nn::CachedDecoder& model, int64_t context, int num_threads)
    : vocab_(model.vocab_size()), context_(context) {
  exe_ = runtime::host::compile(nn::decode_step(model, 1, context), {.num_threads = num_threads});
  inputs_.emplace_back(DType::s32, Shape{1});
  inputs_.emplace_back(DType::s32, Shape{});
  const ir::TensorType cache = model.kv_cache_type(1, context);
  for (int64_t i = 0; i < 2 * model.num_layers(); ++i)
    inputs_.emplace_back(cache.dtype, cache.shape);
  for (auto& p : model.named_parameters()) inputs_.push_back(p.param->value);
}

Decoder::~Decoder() = default;

void Decoder::reset() { window_.clear(); }

std::vector<float> Decoder::run(int32_t token, int32_t pos) {
  inputs_[0].data<int32_t>()[0] = token;
  inputs_[1].data<int32_t>()[0] = pos;
  std::vector<Array> out = exe_->run_donated(inputs_);
  for (size_t i = 1; i < out.size(); ++i) inputs_[1 + i] = std::move(out[i]);  // caches back
  ++steps_;
  const float* l = out[0].data<float>();
  return std::vector<float>(l, l + vocab_);
}

std::vector<float> Decoder::push(int32_t token) {
  if (token < 0 || token >= vocab_)
    fail("Decoder: token {} is outside the vocabulary [0, {})", token, vocab_);
  if (int64_t(window_.size()) == context_) {
    // Slide: position embeddings are absolute, so the kept tokens' keys and values change
    // with their positions; recompute them from slot 0.
    window_.erase(window_.begin());
    for (size_t i = 0; i < window_.size(); ++i) run(window_[i], int32_t(i));
  }
  window_.push_back(token);
  return run(token, int32_t(window_.size() - 1));
}

namespace {

// HF's TopPLogitsWarper on `scaled` (logits after temperature and top_k): softmax, tokens sorted
// from least to most likely (ties: higher index first, so a tie keeps the lower index as top_k
// does), and those whose cumulative probability is <= 1 - top_p set to -inf; the most likely
// one always stays.
void drop_past_top_p(std::vector<float>& scaled, double top_p) {
  const double top = *std::max_element(scaled.begin(), scaled.end());
  std::vector<double> p(scaled.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(double(scaled[i]) - top);
  std::vector<int32_t> order(scaled.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return scaled[size_t(a)] < scaled[size_t(b)] ||
           (scaled[size_t(a)] == scaled[size_t(b)] && a > b);
  });
  double cumulative = 0;
  for (size_t r = 0; r + 1 < order.size(); ++r) {
    cumulative += p[size_t(order[r])] / z;
    if (cumulative > 1 - top_p) break;
    scaled[size_t(order[r])] = -INFINITY;
  }
}

}  // namespace

int32_t sample_token(std::span<const float> logits, const SampleOptions& o, random::Key key) {
  if (o.vocab < 0) fail("sample: vocab {} must be >= 0 (0: every id)", o.vocab);
  if (o.vocab > 0 && size_t(o.vocab) < logits.size()) logits = logits.first(size_t(o.vocab));
  if (logits.empty()) fail("sample: empty logits");
  if (!(o.temperature >= 0) || std::isinf(o.temperature))
    fail("sample: temperature {} must be finite and >= 0", o.temperature);
  if (o.top_k < 0) fail("sample: top_k {} must be >= 0 (0 keeps every token)", o.top_k);
  if (!(o.top_p > 0 && o.top_p <= 1))
    fail("sample: top_p {} must be in (0, 1] (1 keeps every token)", o.top_p);
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i]) || logits[i] == INFINITY)
      fail(
          "sample: logit {} of token {} is not finite (the model's parameters or inputs hold "
          "NaN or inf?)",
          logits[i], i);
  const int64_t n = int64_t(logits.size());
  if (o.temperature == 0)
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<float> scaled(logits.size());
  for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = float(double(logits[i]) / o.temperature);
  if (std::any_of(scaled.begin(), scaled.end(), [](float v) { return v == INFINITY; })) {
    // A tiny temperature overflowed f32: shift by the largest logit first (same softmax).
    const double top = *std::max_element(logits.begin(), logits.end());
    for (size_t i = 0; i < scaled.size(); ++i)
      scaled[i] = float((double(logits[i]) - top) / o.temperature);
  }
  if (o.top_k > 0 && o.top_k < n) {
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    for (size_t i = size_t(o.top_k); i < order.size(); ++i) scaled[size_t(order[i])] = -INFINITY;
  }
  if (o.top_p < 1) drop_past_top_p(scaled, o.top_p);
  Array l = Array::from<float>(Shape{n}, scaled);
  return random::categorical(key, l).data<int32_t>()[0];
}

std::vector<int32_t> generate(Decoder& d, std::span<const int32_t> prompt, int64_t n,
                              const SampleOptions& o,
                              const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) fail("generate: the prompt is empty (at least one token is needed)");
  if (n < 0) fail("generate: {} tokens requested; the count must be >= 0", n);
  sample_token(std::vector<float>{0.0f}, o, random::key(0));  // checks the options up front
  for (int32_t t : prompt)
    if (t < 0 || t >= d.vocab())
      fail("generate: prompt token {} is outside the vocabulary [0, {})", t, d.vocab());
  // Only the last `context` prompt tokens are ever seen: feeding just those gives the same
  // window as feeding all and sliding.
  const size_t ctx = size_t(d.context());
  d.reset();
  std::vector<float> logits;
  for (int32_t t : prompt.subspan(prompt.size() - std::min(prompt.size(), ctx))) logits = d.push(t);
  random::Key key = random::key(o.seed);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    auto [next, sub] = random::split<2>(key);
    key = next;
    out.push_back(sample_token(logits, o, sub));
    if (on_token) on_token(out.back());
    if (std::find(o.eos.begin(), o.eos.end(), out.back()) != o.eos.end()) break;
    if (i + 1 < n) logits = d.push(out.back());
  }
  return out;
}

}  // namespace tlaloc::recipes::lm
