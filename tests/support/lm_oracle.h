// The oracle for KV-cache decoding: a CausalLM's next-token logits recomputed by its full
// forward() on the whole prefix, with the attention composite expanded into plain ops (no
// cache, no fused kernel, one program per prefix length).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "tlaloc/nn/transformer.h"
#include "tlaloc/runtime/executable.h"

namespace tlaloc::testing {

class RecomputeOracle {
 public:
  explicit RecomputeOracle(nn::CausalLM& model) : model_(model) {}
  // Logits f32 [vocab] at the last position of forward(tokens [1, n]), 1 <= n <= context.
  std::vector<float> last_logits(std::span<const int32_t> tokens);
  // The same for the last min(n, context) tokens (the sliding window).
  std::vector<float> next_logits(std::span<const int32_t> history);

 private:
  nn::CausalLM& model_;
  std::map<size_t, std::unique_ptr<runtime::Executable>> by_length_;
};

}  // namespace tlaloc::testing
