// The attribute rules of the convolution, window and collective ops (verifier_rules.h).
#include "tlaloc/ir/verifier_rules.h"

#include <fmt/ranges.h>

#include <limits>

namespace tlaloc::ir::verifier {

int64_t num_windows(const Ctx& c, int64_t n, int64_t base_dilation, int64_t lo, int64_t hi,
                    int64_t window, int64_t window_dilation, int64_t stride) {
  using W = __int128;
  const W dilated = n == 0 ? 0 : W(n - 1) * base_dilation + 1;
  const W padded = W(lo) + dilated + hi;
  const W span = W(window - 1) * window_dilation + 1;
  if (padded == 0 || span > padded) return 0;
  const W count = (padded - span) / stride + 1;
  if (count > W(std::numeric_limits<int64_t>::max())) c.error("window count overflows int64");
  return int64_t(count);
}

int64_t replica_group_checks(const Ctx& c, const Attrs& a) {
  const auto& g = a.replica_groups;
  if (g.empty()) c.error("replica_groups must not be empty");
  std::set<int64_t> seen;
  for (const auto& group : g) {
    if (group.empty() || group.size() != g[0].size())
      c.error("replica_groups {} must all have one size >= 1", g);
    for (int64_t id : group)
      if (id < 0 || !seen.insert(id).second)
        c.error("replica_groups {}: replica id {} {}", g, id, id < 0 ? "is negative" : "repeats");
  }
  if (a.channel_id < 0) c.error("channel_id {} must be >= 0", a.channel_id);
  return int64_t(g[0].size());
}

void window_checks(const Ctx& c, int64_t r, const Attrs& a, bool dilations) {
  auto sized = [&](const Dims& v, const char* what) {
    if (int64_t(v.size()) != r) c.error("{} {} must have rank {} entries", what, v, r);
  };
  auto at_least = [&](const Dims& v, int64_t m, const char* what) {
    sized(v, what);
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] < m) c.error("{} {} on dim {} must be >= {}", what, v[i], i, m);
  };
  at_least(a.window_dimensions, 1, "window_dimensions");
  at_least(a.window_strides, 1, "window_strides");
  at_least(a.padding_low, 0, "padding_low");
  at_least(a.padding_high, 0, "padding_high");
  if (dilations) {
    at_least(a.base_dilations, 1, "base_dilations");
    at_least(a.window_dilations, 1, "window_dilations");
  }
}

TensorType infer_convolution(const Ctx& c, const Attrs& a) {
  c.arity(2);
  const TensorType &l = c.in[0], &r = c.in[1];
  const ConvDimensionNumbers& dn = a.conv_dimension_numbers;
  if (l.dtype != r.dtype || !is_floating(l.dtype))
    c.error("lhs and rhs need one floating dtype, got {} and {}", name(l.dtype), name(r.dtype));
  const int64_t n = l.shape.rank();
  if (r.shape.rank() != n) c.error("lhs rank {} differs from rhs rank {}", n, r.shape.rank());
  if (n < 2) c.error("operands need rank >= 2, got {}", n);
  const size_t ns = size_t(n - 2);
  auto count = [&](const Dims& v, const char* what) {
    if (v.size() != ns)
      c.error("{} {} has {} entries for {} spatial dimensions", what, v, v.size(), ns);
  };
  auto positive = [&](const Dims& v, const char* what) {
    count(v, what);
    for (int64_t x : v)
      if (x < 1) c.error("{} {} must be positive", what, v);
  };
  positive(a.window_strides, "window_strides");
  count(a.padding_low, "padding (low)");
  count(a.padding_high, "padding (high)");
  positive(a.lhs_dilation, "lhs_dilation");
  positive(a.rhs_dilation, "rhs_dilation");
  count(dn.input_spatial_dimensions, "input_spatial_dimensions");
  count(dn.kernel_spatial_dimensions, "kernel_spatial_dimensions");
  count(dn.output_spatial_dimensions, "output_spatial_dimensions");
  auto with = [](int64_t x, int64_t y, const Dims& s) {
    Dims v{x, y};
    v.insert(v.end(), s.begin(), s.end());
    return v;
  };
  c.axes(with(dn.input_batch_dimension, dn.input_feature_dimension, dn.input_spatial_dimensions), n,
         "input dimension numbers (batch, feature, spatial)");
  c.axes(with(dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension,
              dn.kernel_spatial_dimensions),
         n, "kernel dimension numbers (input feature, output feature, spatial)");
  c.axes(with(dn.output_batch_dimension, dn.output_feature_dimension, dn.output_spatial_dimensions),
         n, "output dimension numbers (batch, feature, spatial)");
  const int64_t fg = a.feature_group_count, bg = a.batch_group_count;
  if (fg < 1) c.error("feature_group_count {} must be positive", fg);
  if (bg < 1) c.error("batch_group_count {} must be positive", bg);
  if (fg > 1 && bg > 1)
    c.error("feature_group_count {} and batch_group_count {}: at most one may exceed 1", fg, bg);
  const int64_t batch = l.shape[dn.input_batch_dimension];
  const int64_t feat = l.shape[dn.input_feature_dimension];
  const int64_t kin = r.shape[dn.kernel_input_feature_dimension];
  const int64_t kout = r.shape[dn.kernel_output_feature_dimension];
  if (batch % bg != 0)
    c.error("batch_group_count {} does not divide the input batch size {}", bg, batch);
  if (feat % fg != 0)
    c.error("feature_group_count {} does not divide the input feature size {}", fg, feat);
  if (kin != feat / fg)
    c.error("kernel input features {} != input features {} / feature_group_count {}", kin, feat,
            fg);
  if (kout % bg != 0)
    c.error("batch_group_count {} does not divide the kernel output features {}", bg, kout);
  if (kout % fg != 0)
    c.error("feature_group_count {} does not divide the kernel output features {}", fg, kout);
  Shape s;
  s.dims.assign(size_t(n), 0);
  s[dn.output_batch_dimension] = batch / bg;
  s[dn.output_feature_dimension] = kout;
  for (size_t i = 0; i < ns; ++i) {
    const int64_t x = l.shape[dn.input_spatial_dimensions[i]];
    const int64_t w = r.shape[dn.kernel_spatial_dimensions[i]];
    const int64_t dilated = x == 0 ? 0 : (x - 1) * a.lhs_dilation[i] + 1;
    const int64_t padded = a.padding_low[i] + dilated + a.padding_high[i];
    const int64_t window = w == 0 ? 0 : (w - 1) * a.rhs_dilation[i] + 1;
    if (padded < 0)
      c.error("padding ({}, {}) on spatial dim {} leaves a negative size {}", a.padding_low[i],
              a.padding_high[i], i, padded);
    s[dn.output_spatial_dimensions[i]] =
        padded == 0 || window > padded ? 0 : (padded - window) / a.window_strides[i] + 1;
  }
  return {l.dtype, s};
}

}  // namespace tlaloc::ir::verifier
