// Pooling and flattening layers (torch.nn.MaxPool2d, AvgPool2d, Flatten) over trace/window.h.
// Arguments, defaults and reprs are PyTorch's; an int argument applies to both spatial dims
// (Pool2dArg{2}), a pair to (height, width) (Pool2dArg{2, 3}) and prints as "(2, 3)".
#pragma once

#include <optional>
#include <vector>

#include "tlaloc/nn/module.h"
#include "tlaloc/trace/window.h"

namespace tlaloc::nn {

// PyTorch's int-or-tuple argument, remembered as given (for repr).
struct Pool2dArg {
  trace::Size2 v{0, 0};
  bool pair = false;
  Pool2dArg(int64_t x) : v{x, x} {}  // NOLINT: implicit, as PyTorch's ints
  Pool2dArg(int64_t h, int64_t w) : v{h, w}, pair(true) {}
  std::string str() const;  // "2" or "(2, 3)"
};

// x [N, C, H, W] or [C, H, W] -> max over each window (trace::max_pool2d). stride defaults to
// kernel_size. Errors as trace::max_pool2d's (at forward).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Pool2dArg kernel_size, std::optional<Pool2dArg> stride = std::nullopt,
                     Pool2dArg padding = 0, Pool2dArg dilation = 1, bool ceil_mode = false);
  trace::Tensor forward(const trace::Tensor& x) override;
  // "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
  std::string repr() const override;

 private:
  Pool2dArg kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

// x [N, C, H, W] or [C, H, W] -> mean over each window (trace::avg_pool2d).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Pool2dArg kernel_size, std::optional<Pool2dArg> stride = std::nullopt,
                     Pool2dArg padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  trace::Tensor forward(const trace::Tensor& x) override;
  // "AvgPool2d(kernel_size=2, stride=2, padding=0)" (PyTorch prints only these three)
  std::string repr() const override;

 private:
  Pool2dArg kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
  std::optional<int64_t> divisor_override_;
};

// Merges dims start_dim..end_dim (negative: from the end) into one: [N, C, H, W] ->
// [N, C*H*W] by default. Throws tlaloc::Error (at forward) for dims out of range or
// start_dim after end_dim; a rank-0 x becomes [1], as torch.flatten.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;  // "Flatten(start_dim=1, end_dim=-1)"

 private:
  int64_t start_dim_, end_dim_;
};

// Splits dim `dim` (negative: from the end) into `sizes` (torch.nn.Unflatten): [N, 784] ->
// [N, 1, 28, 28] with Unflatten(1, {1, 28, 28}). Throws tlaloc::Error (at forward) for a dim
// out of range or sizes whose product is not that dim's size.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, std::vector<int64_t> sizes);
  trace::Tensor forward(const trace::Tensor& x) override;
  std::string repr() const override;  // "Unflatten(dim=1, unflattened_size=(1, 28, 28))"

 private:
  int64_t dim_;
  std::vector<int64_t> sizes_;
};

}  // namespace tlaloc::nn
