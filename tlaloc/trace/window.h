// Windowed reductions on traced tensors: StableHLO reduce_window / select_and_scatter (see
// ir/builder.h) and PyTorch's 2-D pooling (torch.nn.functional.max_pool2d / avg_pool2d).
// Float dtypes. Errors are tlaloc::Error naming the function and the bad argument.
#pragma once

#include <optional>

#include "tlaloc/trace/size2.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::trace {

// reduce_window of x: one entry per dimension of x in each vector; empty vectors take the
// defaults (strides 1, padding 0, dilations 1). Padding positions hold the init (sum 0,
// max -inf, min +inf).
Tensor reduce_window(const Tensor& x, ir::ReduceKind kind, std::vector<int64_t> window_dimensions,
                     std::vector<int64_t> window_strides = {},
                     std::vector<int64_t> padding_low = {}, std::vector<int64_t> padding_high = {},
                     std::vector<int64_t> base_dilations = {},
                     std::vector<int64_t> window_dilations = {});
// select_and_scatter with a compare select (GE: first maximum of each window) and an add
// scatter: source (the window count of operand's windows) added at each window's pick.
Tensor select_and_scatter(const Tensor& operand, const Tensor& source, ir::Comparison select,
                          std::vector<int64_t> window_dimensions,
                          std::vector<int64_t> window_strides = {},
                          std::vector<int64_t> padding_low = {},
                          std::vector<int64_t> padding_high = {});

// torch.nn.functional.max_pool2d on x [N, C, H, W] or [C, H, W]: the maximum of each window
// (positions outside x are -inf: never the maximum). Output [.., OH, OW] with
// OH = floor((H + 2 pH - dH (kH - 1) - 1) / sH) + 1 (ceil with ceil_mode, less one when the
// last window would start past H + pH). stride defaults to kernel_size. Gradient: to the first
// maximum of each window (as PyTorch). Throws for a kernel, stride or dilation < 1, padding
// < 0 or > kernel / 2, a rank other than 3 or 4, or an empty output.
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                  Size2 padding = {0, 0}, Size2 dilation = {1, 1}, bool ceil_mode = false);

// torch.nn.functional.avg_pool2d: window sums divided by divisor_override if given, else by
// the window's size clipped to the padded input (count_include_pad) or to x itself (not).
// Shapes and errors as max_pool2d (dilation 1); divisor_override must be nonzero.
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                  Size2 padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

}  // namespace tlaloc::trace
