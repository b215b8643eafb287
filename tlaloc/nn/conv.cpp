#include "tlaloc/nn/conv.h"

#include <fmt/format.h>

#include <cmath>

#include "tlaloc/random/program.h"

namespace tlaloc::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, trace::Size2 kernel_size,
               trace::Size2 stride, trace::Size2 padding, trace::Size2 dilation, int64_t groups,
               bool bias, DType dtype)
    : in_(in_channels),
      out_(out_channels),
      kernel_(kernel_size),
      stride_(stride),
      padding_(padding),
      dilation_(dilation),
      groups_(groups),
      bias_(bias) {
  if (in_ < 1 || out_ < 1 || groups < 1 || kernel_.h < 1 || kernel_.w < 1 || stride_.h < 1 ||
      stride_.w < 1 || dilation_.h < 1 || dilation_.w < 1)
    fail(
        "Conv2d: in_channels {}, out_channels {}, kernel_size ({}, {}), stride, dilation and "
        "groups {} must be positive",
        in_, out_, kernel_.h, kernel_.w, groups);
  if (padding_.h < 0 || padding_.w < 0)
    fail("Conv2d: padding ({}, {}) must not be negative", padding_.h, padding_.w);
  if (in_ % groups != 0 || out_ % groups != 0)
    fail("Conv2d: in_channels {} and out_channels {} must be divisible by groups {}", in_, out_,
         groups);
  register_parameter("weight", Array(dtype, Shape{out_, in_ / groups, kernel_.h, kernel_.w}));
  if (bias) register_parameter("bias", Array(dtype, Shape{out_}));
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, trace::Size2 kernel_size,
               trace::Size2 stride, trace::Padding padding, trace::Size2 dilation, int64_t groups,
               bool bias, DType dtype)
    : Conv2d(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias, dtype) {
  if (padding == trace::Padding::same && stride != trace::Size2(1))
    fail("Conv2d: padding='same' needs stride 1 (as PyTorch)");
  padding_mode_ = padding;
}

trace::Tensor Conv2d::forward(const trace::Tensor& x) {
  const trace::Tensor& w = param("weight");
  trace::Tensor y = padding_mode_ ? trace::conv2d(x, w, stride_, *padding_mode_, dilation_, groups_)
                                  : trace::conv2d(x, w, stride_, padding_, dilation_, groups_);
  if (bias_) y = y + trace::reshape(param("bias"), {out_, 1, 1});
  return y;
}

std::string Conv2d::repr() const {
  auto pair = [](trace::Size2 s) { return fmt::format("({}, {})", s.h, s.w); };
  std::string s = fmt::format("Conv2d({}, {}, kernel_size={}, stride={}", in_, out_, pair(kernel_),
                              pair(stride_));
  if (padding_mode_)
    s += fmt::format(", padding={}", trace::name(*padding_mode_));
  else if (padding_ != trace::Size2(0))
    s += ", padding=" + pair(padding_);
  if (dilation_ != trace::Size2(1)) s += ", dilation=" + pair(dilation_);
  if (groups_ != 1) s += fmt::format(", groups={}", groups_);
  if (!bias_) s += ", bias=False";
  return s + ")";
}

void Conv2d::reset_parameters(const random::Key& key) {
  auto keys = random::split(key, 2);
  const double bound = 1.0 / std::sqrt(double(in_ / groups_ * kernel_.h * kernel_.w));
  Parameter& w = parameter("weight");
  w.value = random::uniform(keys[0], w.value.shape(), w.value.dtype(), -bound, bound);
  if (bias_) {
    Parameter& b = parameter("bias");
    b.value = random::uniform(keys[1], b.value.shape(), b.value.dtype(), -bound, bound);
  }
}

}  // namespace tlaloc::nn
