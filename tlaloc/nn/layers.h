// Basic layers. Shapes follow PyTorch: Linear maps [..., in_features] -> [..., out_features]
// with weight [out_features, in_features] and bias [out_features].
#pragma once

#include <span>

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

  // A LoRA adapter (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"; PEFT's
  // lora.Linear): children lora_A (Linear(in, r), no bias: weight [r, in]), lora_B (Linear(r,
  // out), no bias: [out, r]) and, for 0 < dropout, lora_dropout (Dropout(dropout)); the forward
  // becomes x Wᵀ + b + scaling · (dropout(x) Aᵀ) Bᵀ, never forming W + scaling · B A. A is
  // drawn as Linear's own (kaiming-uniform, a = √5: U(-1/√in, 1/√in)) and B is 0 when
  // initialised (reset_parameters, Module::init). Throws tlaloc::Error for r < 1, a
  // non-finite scaling, dropout outside [0, 1) or a second adapter.
  void add_lora(int64_t r, double scaling, double dropout);
  bool has_lora() const { return lora_r_ > 0; }
  int64_t lora_r() const { return lora_r_; }
  double lora_scaling() const { return lora_scaling_; }

  // x through each of `layers` (x [..., in]; one result [..., out_i] per layer) as one GEMM: the
  // weights concatenated along out in the program (the parameters keep their own names) and the
  // result sliced, as the fused QKV projection of GPT-style models. Layers with a LoRA adapter,
  // or that differ in in_features, bias or dtype, run one by one. Throws as forward().
  static std::vector<trace::Tensor> forward_fused(std::span<Linear* const> layers,
                                                  const trace::Tensor& x);

 private:
  int64_t in_, out_;
  bool bias_;
  int64_t lora_r_ = 0;
  double lora_scaling_ = 0;
  bool lora_dropout_ = false;
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

// SiLU / swish (torch.nn.SiLU; Elfwing et al. 2017, Ramachandran et al. 2017): x · sigmoid(x),
// the activation of Llama's SwiGLU MLP (Shazeer 2020).
trace::Tensor silu(const trace::Tensor& x);

class SiLU : public Module {
 public:
  trace::Tensor forward(const trace::Tensor& x) override { return silu(x); }
  std::string repr() const override { return "SiLU()"; }
};

// GELU (torch.nn.GELU). approximate: "tanh" (composites::gelu; the default here, unlike PyTorch,
// so existing models keep their meaning) or "none" (the erf form, trace::gelu_erf). Throws
// tlaloc::Error for another value.
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "tanh");
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override { return "GELU(approximate='" + approximate_ + "')"; }
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

// Dropout (torch.nn.Dropout; Srivastava et al. 2014) of x (any shape, float dtype) with key
// u32[2] (random/program.h): each element is kept with probability 1 - p and scaled by
// 1/(1 - p), else zeroed; the keep-mask is random::bernoulli(key, 1 - p, x.shape), drawn in the
// program from threefry bits. p = 0 returns x; p = 1 returns zeros. The gradient (autodiff of
// the select) is mask / (1 - p). Throws tlaloc::Error for p outside [0, 1] or a non-float x.
trace::Tensor dropout(const trace::Tensor& x, const trace::Tensor& key, double p);

// The Dropout module: dropout(x, key(), p) in training mode, the identity in eval mode
// (Module::train / eval). key() is this module's key from Module::bind_key, so one compiled
// step serves every step's key. Throws tlaloc::Error for p outside [0, 1], or when training
// with 0 < p and no key bound.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;
  bool takes_init_key() const override { return false; }
  double p() const { return p_; }

 private:
  double p_;
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
