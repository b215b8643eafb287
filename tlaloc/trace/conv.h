// Convolutions on symbolic Tensors: StableHLO's general convolution and PyTorch's conv2d.
#pragma once

#include <string_view>

#include "tlaloc/trace/size2.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::trace {

// StableHLO convolution (ir::Builder::convolution; every attribute in `options`).
Tensor convolution(const Tensor& lhs, const Tensor& rhs, const ir::ConvOptions& options = {});

// torch.nn.functional.conv2d without bias: x [N, C, H, W], weight [O, C / groups, kH, kW]
// -> [N, O, H', W'] with H' = (H + 2 padding.h - dilation.h (kH - 1) - 1) / stride.h + 1 (W'
// alike); padding is added on both sides of each dim. Float dtypes, one for both. Throws
// tlaloc::Error naming conv2d for other ranks, channels that do not match (C != weight's
// dim 1 * groups, O not a multiple of groups), stride / dilation / groups < 1, padding < 0 or
// a window larger than the padded input.
Tensor conv2d(const Tensor& x, const Tensor& weight, Size2 stride = 1, Size2 padding = 0,
              Size2 dilation = 1, int64_t groups = 1);
// PyTorch's string paddings: "same" (output H, W = input H, W; stride 1 only, as PyTorch: an
// odd total pad puts the extra one after) and "valid" (none).
enum class Padding { same, valid };
std::string_view name(Padding p);  // "same", "valid"
Tensor conv2d(const Tensor& x, const Tensor& weight, Size2 stride, Padding padding,
              Size2 dilation = 1, int64_t groups = 1);

}  // namespace tlaloc::trace
