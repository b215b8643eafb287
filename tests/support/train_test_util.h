// Helpers shared by the tests that train (tests/train, the pjrt lane tests).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/nn/batch_norm.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/random/random.h"
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

// Linear(in, 4) -> BatchNorm1d(4) -> Linear(4, out), initialised from key(7): a step that
// updates buffers (the running statistics) beside its parameters.
inline std::unique_ptr<nn::Sequential> batch_norm_mlp(int64_t in, int64_t out) {
  auto m = std::make_unique<nn::Sequential>();
  m->add(std::make_shared<nn::Linear>(in, 4));
  m->add(std::make_shared<nn::BatchNorm1d>(4));
  m->add(std::make_shared<nn::Linear>(4, out));
  m->init(random::key(7));
  return m;
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

// Expects a's and b's parameters, buffers and optimizer state (same names, same order) bitwise
// equal.
inline void expect_same_state(const train::Trainer& a, const train::Trainer& b) {
  for (const auto& [na, nb] : {std::pair{a.named_parameters(), b.named_parameters()},
                               std::pair{a.named_buffers(), b.named_buffers()},
                               std::pair{a.optimizer_state(), b.optimizer_state()}}) {
    ASSERT_EQ(na.size(), nb.size());
    for (size_t i = 0; i < na.size(); ++i)
      EXPECT_TRUE(na[i].second.bitwise_equal(nb[i].second)) << na[i].first;
  }
}

}  // namespace tlaloc::train_test
