// Convolution layers (PyTorch's torch.nn.Conv2d).
#pragma once

#include <optional>
#include <string>

#include "tlaloc/nn/module.h"
#include "tlaloc/trace/conv.h"

namespace tlaloc::nn {

// y = conv2d(x, weight) + bias (torch.nn.Conv2d with padding_mode='zeros'): x [N, in, H, W]
// -> [N, out, H', W'] (trace::conv2d gives H', W'). Parameters weight [out, in / groups, kH, kW]
// and, with bias, bias [out]. Default init is PyTorch's reset_parameters: kaiming-uniform with
// a = √5 for the weight and the bias's bound, both U(-1/√fan_in, 1/√fan_in), fan_in = in /
// groups · kH · kW, drawn from threefry bits (nn::Linear's way). Throws tlaloc::Error for
// sizes < 1, padding < 0, in or out not divisible by groups, or padding "same" with a stride.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, trace::Size2 kernel_size,
         trace::Size2 stride = 1, trace::Size2 padding = 0, trace::Size2 dilation = 1,
         int64_t groups = 1, bool bias = true, DType dtype = DType::f32);
  // padding "same" or "valid" (PyTorch's string forms).
  Conv2d(int64_t in_channels, int64_t out_channels, trace::Size2 kernel_size, trace::Size2 stride,
         trace::Padding padding, trace::Size2 dilation = 1, int64_t groups = 1, bool bias = true,
         DType dtype = DType::f32);
  trace::Tensor forward(const trace::Tensor& x) override;
  // PyTorch's: "Conv2d(1, 32, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))".
  std::string repr() const override;
  void reset_parameters(const random::Key& key) override;

  int64_t in_channels() const { return in_; }
  int64_t out_channels() const { return out_; }
  trace::Size2 kernel_size() const { return kernel_; }

 private:
  int64_t in_, out_;
  trace::Size2 kernel_, stride_, padding_, dilation_;
  std::optional<trace::Padding> padding_mode_;  // none: the sizes
  int64_t groups_;
  bool bias_;
};

}  // namespace tlaloc::nn
