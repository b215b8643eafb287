// Helpers shared by the tests that train (tests/train, the pjrt lane tests).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tlaloc/nn/transformer.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train_test {

// A one-layer causal LM of width 8 (vocab 256, context 4, 2 heads sharing 1 kv head, MLP 16)
// with the given block choices.
inline nn::CausalLMConfig tiny_lm(std::string norm, std::string gelu, double dropout) {
  return {.vocab = 256,
          .context = 4,
          .d_model = 8,
          .layers = 1,
          .heads = 2,
          .kv_heads = 1,
          .d_ff = 16,
          .norm = std::move(norm),
          .gelu = std::move(gelu),
          .dropout = dropout};
}

// Runs n steps with no per-step data and returns each step's loss (read back every step).
inline std::vector<double> step_losses(train::Trainer& t, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i) {
    t.step({});
    losses.push_back(t.read_last().loss);
  }
  return losses;
}

// Expects a's and b's parameters and optimizer state (same names, same order) bitwise equal.
inline void expect_same_state(const train::Trainer& a, const train::Trainer& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(pa[i].second.bitwise_equal(pb[i].second)) << pa[i].first;
  auto sa = a.optimizer_state(), sb = b.optimizer_state();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i)
    EXPECT_TRUE(sa[i].second.bitwise_equal(sb[i].second)) << sa[i].first;
}

}  // namespace tlaloc::train_test
