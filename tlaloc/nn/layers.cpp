#include "tlaloc/nn/layers.h"

#include <fmt/format.h>

#include <cmath>

#include "tlaloc/composites/composites.h"
#include "tlaloc/random/program.h"
#include "tlaloc/trace/autocast.h"
#include "tlaloc/trace/special.h"

namespace tlaloc::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype)
    : in_(in_features), out_(out_features), bias_(bias) {
  if (in_features <= 0 || out_features <= 0)
    fail("Linear: in_features {} and out_features {} must be positive", in_features, out_features);
  register_parameter("weight", Array(dtype, Shape{out_features, in_features}));
  if (bias) register_parameter("bias", Array(dtype, Shape{out_features}));
}

trace::Tensor Linear::forward(const trace::Tensor& x) {
  const trace::Tensor& w = param("weight");
  if (x.rank() < 1 || x.dim(-1) != in_)
    fail("Linear(in_features={}): input {} does not end in {}", in_, ir::to_string(x.type()), in_);
  // Contract x's last dim with w's dim 1: [..., in] x [out, in] -> [..., out], no transpose.
  trace::Tensor y = trace::dot_general(x, w, {{}, {}, {x.rank() - 1}, {1}});
  if (bias_) y = y + param("bias");
  if (lora_r_ > 0) {
    trace::Tensor h = lora_dropout_ ? child("lora_dropout")(x) : x;
    h = child("lora_A")(h) * lora_scaling_;  // scaled at rank r, the narrowest point
    y = y + child("lora_B")(h);
  }
  return y;
}

std::vector<trace::Tensor> Linear::forward_fused(std::span<Linear* const> layers,
                                                 const trace::Tensor& x) {
  bool fuse = layers.size() > 1;
  for (const Linear* l : layers)
    fuse = fuse && !l->has_lora() && l->in_ == layers[0]->in_ && l->bias_ == layers[0]->bias_ &&
           l->param("weight").dtype() == layers[0]->param("weight").dtype();
  std::vector<trace::Tensor> ys;
  if (!fuse) {
    for (Linear* l : layers) ys.push_back(l->forward(x));
    return ys;
  }
  const int64_t in = layers[0]->in_;
  if (x.rank() < 1 || x.dim(-1) != in)
    fail("Linear(in_features={}): input {} does not end in {}", in, ir::to_string(x.type()), in);
  std::vector<trace::Tensor> ws, bs;
  for (const Linear* l : layers) {
    ws.push_back(l->param("weight"));
    if (l->bias_) bs.push_back(l->param("bias"));
  }
  trace::Tensor y = trace::dot_general(x, trace::concat(ws, 0), {{}, {}, {x.rank() - 1}, {1}});
  if (!bs.empty()) y = y + trace::concat(bs, 0);
  int64_t at = 0;
  for (const Linear* l : layers) {
    ys.push_back(trace::slice(y, y.rank() - 1, at, at + l->out_));
    at += l->out_;
  }
  return ys;
}

std::string Linear::repr() const {
  std::string lora;
  if (lora_r_ > 0) lora = fmt::format(", lora_r={}, lora_scaling={}", lora_r_, lora_scaling_);
  return fmt::format("Linear(in_features={}, out_features={}, bias={}{})", in_, out_,
                     bias_ ? "True" : "False", lora);
}

namespace {
// LoRA's B: zeros when initialised (PEFT: nn.init.zeros_), so a fresh adapter changes nothing.
class ZeroLinear : public Linear {
 public:
  using Linear::Linear;
  void reset_parameters(const random::Key&) override {
    Parameter& w = parameter("weight");
    w.value = Array(w.value.dtype(), w.value.shape());
  }
};
}  // namespace

void Linear::add_lora(int64_t r, double scaling, double dropout) {
  if (lora_r_ > 0) fail("{}: it has a LoRA adapter already", repr());
  if (r < 1) fail("LoRA: r = {} must be >= 1", r);
  if (!std::isfinite(scaling)) fail("LoRA: the scaling {} must be finite", scaling);
  if (!(dropout >= 0 && dropout < 1)) fail("LoRA: lora_dropout {} must be in [0, 1)", dropout);
  const DType dt = parameter("weight").value.dtype();
  register_module("lora_A", std::make_shared<Linear>(in_, r, false, dt));
  register_module("lora_B", std::make_shared<ZeroLinear>(r, out_, false, dt));
  if (dropout > 0) register_module("lora_dropout", std::make_shared<Dropout>(dropout));
  lora_r_ = r;
  lora_scaling_ = scaling;
  lora_dropout_ = dropout > 0;
}

void Linear::reset_parameters(const random::Key& key) {
  auto keys = random::split(key, 2);
  double bound = 1.0 / std::sqrt(double(in_));
  Parameter& w = parameter("weight");
  w.value = random::uniform(keys[0], w.value.shape(), w.value.dtype(), -bound, bound);
  if (bias_) {
    Parameter& b = parameter("bias");
    b.value = random::uniform(keys[1], b.value.shape(), b.value.dtype(), -bound, bound);
  }
}

trace::Tensor silu(const trace::Tensor& x) { return x * trace::sigmoid(x); }

GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  if (approximate_ != "tanh" && approximate_ != "none")
    fail("GELU: approximate must be 'none' or 'tanh', got '{}'", approximate_);
}

trace::Tensor GELU::forward(const trace::Tensor& x) {
  return approximate_ == "tanh" ? composites::gelu(x) : trace::gelu_erf(x);
}

trace::Tensor dropout(const trace::Tensor& x, const trace::Tensor& key, double p) {
  if (!(p >= 0 && p <= 1)) fail("dropout: p must be in [0, 1], got {}", p);
  if (!is_floating(x.dtype())) fail("dropout: x must be floating, got {}", ir::to_string(x.type()));
  if (p == 0) return x;
  if (p == 1) return trace::zeros_like(x);  // no 0 · inf: the result does not read x
  trace::Tensor keep = random::bernoulli(key, 1 - p, x.shape());
  return trace::where(keep, x * (1 / (1 - p)), trace::zeros_like(x));
}

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0 && p <= 1)) fail("Dropout: p must be in [0, 1], got {}", p);
}

trace::Tensor Dropout::forward(const trace::Tensor& x) {
  if (!training() || p_ == 0) return x;
  return dropout(x, key(), p_);
}

std::string Dropout::repr() const { return fmt::format("Dropout(p={}, inplace=False)", p_); }

trace::Tensor Sequential::forward(const trace::Tensor& x) {
  trace::Tensor h = x;
  for (auto& [name, m] : children()) h = m->forward(h);
  return h;
}

std::shared_ptr<Sequential> mlp(const std::vector<int64_t>& sizes) {
  if (sizes.size() < 2) fail("mlp: needs at least an input and an output size");
  auto seq = std::make_shared<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    seq->add(std::make_shared<Linear>(sizes[i], sizes[i + 1]));
    if (i + 2 < sizes.size()) seq->add(std::make_shared<ReLU>());
  }
  return seq;
}

}  // namespace tlaloc::nn
