#include "tlaloc/trace/window.h"

#include <fmt/format.h>

#include <algorithm>

namespace tlaloc::trace {

Tensor reduce_window(const Tensor& x, ir::ReduceKind kind, std::vector<int64_t> window_dimensions,
                     std::vector<int64_t> window_strides, std::vector<int64_t> padding_low,
                     std::vector<int64_t> padding_high, std::vector<int64_t> base_dilations,
                     std::vector<int64_t> window_dilations) {
  ir::Builder& b = x.builder();
  return {&b, b.reduce_window(x.id(), kind, std::move(window_dimensions), std::move(window_strides),
                              std::move(padding_low), std::move(padding_high),
                              std::move(base_dilations), std::move(window_dilations))};
}

Tensor select_and_scatter(const Tensor& operand, const Tensor& source, ir::Comparison select,
                          std::vector<int64_t> window_dimensions,
                          std::vector<int64_t> window_strides, std::vector<int64_t> padding_low,
                          std::vector<int64_t> padding_high) {
  ir::Builder& b = operand.builder();
  return {&b, b.select_and_scatter(operand.id(), source.id(), select, std::move(window_dimensions),
                                   std::move(window_strides), std::move(padding_low),
                                   std::move(padding_high))};
}

namespace {

// One spatial dimension of a PyTorch pooling: the output size and the padding after the input
// that makes reduce_window produce exactly that many windows.
struct Axis {
  int64_t in, k, s, p, d, out, hi;
};

Axis pool_axis(const char* fn, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
               bool ceil_mode) {
  if (k < 1 || s < 1 || d < 1)
    fail("{}: kernel_size, stride and dilation must be >= 1 (got {}, {}, {})", fn, k, s, d);
  if (p < 0 || p > k / 2)
    fail("{}: padding {} must be >= 0 and at most half the kernel size {}", fn, p, k);
  const int64_t span = d * (k - 1) + 1, room = in + 2 * p - span;
  int64_t out = room < 0 ? 0 : (ceil_mode ? (room + s - 1) / s : room / s) + 1;
  // ceil_mode: the last window must start inside the input or the left padding.
  if (ceil_mode && out > 0 && (out - 1) * s >= in + p) --out;
  if (out < 1)
    fail(
        "{}: input size {} with kernel {}, stride {}, padding {}, dilation {} gives output "
        "size {} (too small)",
        fn, in, k, s, p, d, out);
  return {in, k, s, p, d, out, std::max<int64_t>((out - 1) * s + span - in - p, 0)};
}

// The pooling's reduce_window arguments over x's dims: windows on the last two only.
struct Pool {
  Axis h, w;
  std::vector<int64_t> win, stride, lo, hi, dil;
};

Pool pool_of(const char* fn, const Tensor& x, Size2 k, std::optional<Size2> stride, Size2 pad,
             Size2 dil, bool ceil_mode) {
  if (x.rank() != 3 && x.rank() != 4)
    fail("{}: expects x [N, C, H, W] or [C, H, W], got {}", fn, to_string(x.shape()));
  if (!is_floating(x.dtype())) fail("{}: expects a floating dtype, got {}", fn, name(x.dtype()));
  const Size2 s = stride.value_or(k);
  Pool p{pool_axis(fn, x.dim(-2), k[0], s[0], pad[0], dil[0], ceil_mode),
         pool_axis(fn, x.dim(-1), k[1], s[1], pad[1], dil[1], ceil_mode),
         {},
         {},
         {},
         {},
         {}};
  const size_t lead = size_t(x.rank() - 2);
  p.win.assign(lead, 1);
  p.stride.assign(lead, 1);
  p.lo.assign(lead, 0);
  p.hi.assign(lead, 0);
  p.dil.assign(lead, 1);
  for (const Axis* a : {&p.h, &p.w}) {
    p.win.push_back(a->k);
    p.stride.push_back(a->s);
    p.lo.push_back(a->p);
    p.hi.push_back(a->hi);
    p.dil.push_back(a->d);
  }
  return p;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                  Size2 dilation, bool ceil_mode) {
  Pool p = pool_of("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode);
  return reduce_window(x, ir::ReduceKind::max, p.win, p.stride, p.lo, p.hi, {}, p.dil);
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  Pool p = pool_of("avg_pool2d", x, kernel_size, stride, padding, {1, 1}, ceil_mode);
  if (divisor_override && *divisor_override == 0)
    fail("avg_pool2d: divisor_override must be nonzero");
  Tensor sum = reduce_window(x, ir::ReduceKind::sum, p.win, p.stride, p.lo, p.hi);
  if (divisor_override) return sum / double(*divisor_override);
  // PyTorch's divisor per output position: the window clipped to [-p, in + p) (padding
  // counted) or to [0, in) (not counted).
  auto extent = [&](const Axis& a, int64_t o) {
    int64_t start = o * a.s - a.p, end = std::min(start + a.k, a.in + a.p);
    if (!count_include_pad) {
      start = std::max<int64_t>(start, 0);
      end = std::min(end, a.in);
    }
    return end - start;
  };
  std::vector<double> div;
  for (int64_t oh = 0; oh < p.h.out; ++oh)
    for (int64_t ow = 0; ow < p.w.out; ++ow)
      div.push_back(double(extent(p.h, oh) * extent(p.w, ow)));
  const bool uniform = std::all_of(div.begin(), div.end(), [&](double v) { return v == div[0]; });
  if (uniform) return sum / div[0];
  Tensor d =
      astype(constant(Array::from_doubles(DType::f64, Shape{p.h.out, p.w.out}, div)), x.dtype());
  return sum / d;
}

}  // namespace tlaloc::trace
