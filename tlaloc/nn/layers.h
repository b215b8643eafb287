// Basic layers. Shapes follow PyTorch: Linear maps [..., in_features] -> [..., out_features]
// with weight [out_features, in_features] and bias [out_features].
#pragma once

#include <initializer_list>

#include "tlaloc/nn/module.h"

namespace tlaloc::nn {

// y = x Wᵀ + b (torch.nn.Linear). Default init is PyTorch's: W ~ U(-1/√in, 1/√in) (kaiming
// uniform with a = √5) and b ~ U(-1/√in, 1/√in), drawn from threefry bits (same distribution
// as PyTorch, not the same numbers).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::f32);
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;
  void reset_parameters(const random::Key& key) override;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  bool bias_;
};

// Elementwise activations (no parameters).
class ReLU : public Module {
 public:
  trace::Tensor forward(const trace::Tensor& x) override { return trace::relu(x); }
  std::string repr() const override { return "ReLU()"; }
};

class Tanh : public Module {
 public:
  trace::Tensor forward(const trace::Tensor& x) override { return trace::tanh(x); }
  std::string repr() const override { return "Tanh()"; }
};

// GELU, tanh approximation (torch.nn.GELU(approximate="tanh")).
class GELU : public Module {
 public:
  trace::Tensor forward(const trace::Tensor& x) override { return trace::gelu(x); }
  std::string repr() const override { return "GELU(approximate='tanh')"; }
};

// Runs children in order; they are named "0", "1", ... as in torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  // Appends a module; returns *this for chaining.
  template <typename M>
  Sequential& add(std::shared_ptr<M> m) {
    register_module(std::to_string(count_++), std::move(m));
    return *this;
  }
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override { return "Sequential"; }

 private:
  int count_ = 0;
};

// An MLP: Linear(sizes[0], sizes[1]), ReLU, ..., Linear(sizes[n-2], sizes[n-1]) (no final ReLU).
std::shared_ptr<Sequential> mlp(const std::vector<int64_t>& sizes);

}  // namespace tlaloc::nn
