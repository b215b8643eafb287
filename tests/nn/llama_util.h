// Helpers of the Llama tests (llama_test.cpp, llama_torch_test.cpp): tiny configs, parameters
// moved off their init values, and the model's logits / loss and gradients on the host lane.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/nn/models/llama.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/host/compile.h"

namespace tlaloc::llama_test {

using nn::models::LlamaConfig;
using nn::models::LlamaForCausalLM;
using trace::Tensor;

// vocab 61, hidden 32, MLP 48, 2 layers, `heads` query heads of 8 sharing `kv_heads`.
inline LlamaConfig tiny(int64_t heads, int64_t kv_heads, bool tied) {
  LlamaConfig c;
  c.vocab_size = 61;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  c.initializer_range = 0.3;  // large enough that attention is far from uniform
  return c;
}

// The llama3 scaling with a short original context, so that at 12 positions the scaled, the
// smoothed and the unchanged frequencies all occur (theta 500000).
inline LlamaConfig with_llama3(LlamaConfig c) {
  c.rope_theta = 500000;
  c.rope_scaling = nn::models::LlamaRopeScaling{.rope_type = "llama3",
                                                .llama3 = {.factor = 8,
                                                           .low_freq_factor = 1,
                                                           .high_freq_factor = 4,
                                                           .original_max_position_embeddings = 64}};
  return c;
}

// init(key(seed)), then norm weights 1 + N(0, 0.2²) and biases N(0, 0.1²) so that every
// parameter matters; `dtype` f64 converts every parameter.
inline void randomize(nn::Module& m, uint64_t seed, DType dtype = DType::f32) {
  m.init(random::key(seed));
  uint32_t i = 0;
  for (auto& p : m.named_parameters()) {
    Array& v = p.param->value;
    const bool norm = p.name.find("norm") != std::string::npos;
    if (norm || p.name.ends_with(".bias")) {
      Array r = random::normal(random::fold_in(random::key(seed + 1), i), v.shape());
      for (float& x : r.span<float>()) x = norm ? 1 + 0.2f * x : 0.1f * x;
      v = std::move(r);
    }
    v = v.astype(dtype);
    ++i;
  }
}

inline std::vector<ir::TensorType> param_types(nn::Module& m) {
  std::vector<ir::TensorType> t;
  for (auto& p : m.named_parameters())
    t.push_back({p.param->value.dtype(), p.param->value.shape()});
  return t;
}

// forward(tokens[, mask]) on the host lane: logits [batch, seq, vocab].
inline Array logits(LlamaForCausalLM& m, const Array& tokens, const std::optional<Array>& mask = {},
                    int threads = 1) {
  std::vector<Array> in{tokens};
  if (mask) in.push_back(*mask);
  const size_t first = in.size();
  std::vector<ir::TensorType> types;
  for (auto& a : in) types.push_back({a.dtype(), a.shape()});
  for (auto& t : param_types(m)) types.push_back(t);
  for (auto& p : m.named_parameters()) in.push_back(p.param->value);
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> x) {
        m.bind(x.subspan(first));
        std::optional<Tensor> mk;
        if (first == 2) mk = x[1];
        return std::vector<Tensor>{m.forward(x[0], mk)};
      },
      types, {}, {}, "llama_forward");
  return runtime::host::compile(passes::simplify(f), {.num_threads = threads})->run(in)[0];
}

// The mean next-token cross-entropy (nn::next_token_loss) and its gradient for every
// parameter (named_parameters() order): {loss, grads...}.
inline std::vector<Array> loss_and_grads(LlamaForCausalLM& m, const Array& tokens,
                                         int threads = 1) {
  std::vector<ir::TensorType> types{{tokens.dtype(), tokens.shape()}};
  for (auto& t : param_types(m)) types.push_back(t);
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> x) {
        m.bind(x.subspan(1));
        return std::vector<Tensor>{nn::next_token_loss(m.forward(x[0]), x[0])};
      },
      types, {}, {}, "llama_loss");
  std::vector<int> wrt;
  for (size_t i = 1; i < types.size(); ++i) wrt.push_back(int(i));
  std::vector<Array> in{tokens};
  for (auto& p : m.named_parameters()) in.push_back(p.param->value);
  ir::Function g = passes::simplify(autodiff::value_and_grad(f, wrt));
  return runtime::host::compile(g, {.num_threads = threads})->run(in);
}

// max |a - b| / max |b| (b the reference); over the elements where `keep` is true, if given.
inline double rel_err(const Array& a, const Array& b, const std::vector<bool>* keep = nullptr) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (keep && !(*keep)[i]) continue;
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Whether Debian's /usr/bin/python3 has torch and numpy (the PyTorch oracles' interpreter).
inline bool have_torch() {
  int rc = std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1");
  return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

// Runs tests/nn/llama_torch.py on every NAME.in.safetensors of `dir` (writing
// NAME.out.safetensors); a failed run fails the calling test.
inline void run_llama_torch(const std::string& dir) {
  const std::string cmd = "/usr/bin/python3 '" + std::string(TLALOC_SOURCE_DIR) +
                          "/tests/nn/llama_torch.py' '" + dir + "'";
  int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
}

// Token ids of a [batch, seq] input, drawn from a fixed key.
inline Array tokens(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed = 5) {
  return random::randint(random::key(seed), Shape{batch, seq}, 0, vocab);
}

}  // namespace tlaloc::llama_test
