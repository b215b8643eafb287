// Internal to the host runtime: 2-D f32 convolutions through oneDNN (libdnnl, the library behind
// PyTorch's CPU convolutions), the forward and both gradients, for the instances it takes:
// f32, NCHW input / OIHW kernel / NCHW output, no lhs dilation, no batch groups, padding >= 0.
// Every oneDNN primitive runs single-threaded on a fixed chunk of the batch (chunk size a
// function of the shapes only); the chunks are spread over the run's team, and the kernel
// gradient's per-chunk partial sums are added in chunk order: the bits do not depend on the
// thread count.
#pragma once

#include <memory>
#include <optional>

#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::runtime::host {

// Sizes of one 2-D grouped convolution: x [N, C, H, W], w [O, C / G, kh, kw],
// y [N, O, Ho, Wo]; strides, padding low (top, left) / high (bottom, right), rhs dilation
// (StableHLO's: 1 = none).
struct Conv2d {
  int64_t N = 0, C = 0, H = 0, W = 0, O = 0, G = 1, kh = 0, kw = 0, Ho = 0, Wo = 0;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1;
};

// The Conv2d of convolution node n (x, w) when oneDNN's instance fits (see above; every size
// > 0), else nullopt.
std::optional<Conv2d> conv2d_of(const ir::Function& fn, const ir::Node& n);

enum class Conv2dPass {
  forward,      // (x, w) -> y
  input_grad,   // (d_y, w) -> d_x
  kernel_grad,  // (x, d_y) -> d_w
};

// The oneDNN kernel of one pass of s reading values a, b and writing out; nullptr when oneDNN
// declines the instance (the caller then uses another kernel).
std::unique_ptr<Kernel> make_conv2d_dnnl(const Conv2d& s, Conv2dPass pass, int32_t a, int32_t b,
                                         int32_t out, int num_threads);

}  // namespace tlaloc::runtime::host
