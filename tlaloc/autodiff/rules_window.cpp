// The VJP of reduce_window, as JAX derives it (jax/_src/lax/windowed_reductions.py):
// sum: the cotangent padded (interior stride - 1, edges from the window, padding and
// dilations) and summed over the same window with strides = the base dilations; max / min:
// select_and_scatter of the cotangent onto the first maximum / minimum of each window (with
// window dilations, which JAX refuses and PyTorch's max_pool2d allows: the same picks from
// strided slices, one per window offset; base dilations refused).
#include <cmath>

#include "tlaloc/autodiff/rules.h"

namespace tlaloc::autodiff::detail {

using Dims = std::vector<int64_t>;
using ir::ReduceKind;

namespace {

// A length-n dimension dilated by d: n - 1 holes of d - 1 (0 stays 0).
int64_t dilated(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

// Calls fn(w) for every index w of a window of `dims`, row-major.
template <class Fn>
void for_each_offset(const Dims& dims, Fn&& fn) {
  Dims w(dims.size(), 0);
  while (true) {
    fn(w);
    size_t d = dims.size();
    while (d > 0 && ++w[d - 1] == dims[d - 1]) w[--d] = 0;
    if (d == 0) return;
  }
}

// max / min with window dilations, which select_and_scatter lacks: for each window offset in
// row-major order, the strided slice of the padded operand that offset reads; the cotangent
// goes to the first offset whose element equals the window's result (the pick
// select_and_scatter GE / LE makes), padded back to the operand's positions and summed.
ValueId chooser_by_offsets(const RuleCtx& c) {
  const ir::Attrs& a = c.n.attrs;
  const ir::TensorType ot = c.type(c.operand(0));
  const Shape os = c.type(c.out).shape;
  const int64_t r = ot.shape.rank();
  const double fill = a.reduce_kind == ReduceKind::max ? -INFINITY : INFINITY;
  const ValueId xp =
      c.b.pad(c.operand(0), c.b.scalar(ot.dtype, fill), a.padding_low, a.padding_high);
  const Shape ps = c.type(xp).shape;
  const ValueId zero = c.zeros({ot.dtype, os});
  const ValueId no = c.b.constant(Array::filled(DType::i1, os, 0));
  ValueId found = no, acc = -1;
  for_each_offset(a.window_dimensions, [&](const Dims& w) {
    Dims start, limit, lo, hi, interior;
    for (int64_t d = 0; d < r; ++d) {
      const size_t k = size_t(d);
      start.push_back(w[k] * a.window_dilations[k]);
      limit.push_back(start[k] + (os[d] - 1) * a.window_strides[k] + 1);
      hi.push_back(ps[d] - limit[k]);
      interior.push_back(a.window_strides[k] - 1);
    }
    const ValueId hit =
        c.b.compare(c.b.slice(xp, start, limit, a.window_strides), c.out, ir::Comparison::EQ);
    const ValueId take = c.b.select(found, no, hit);
    found = c.b.binary(ir::Op::or_, found, hit);
    const ValueId g =
        c.b.pad(c.b.select(take, c.ct, zero), c.b.scalar(ot.dtype, 0), start, hi, interior);
    acc = acc < 0 ? g : c.b.binary(ir::Op::add, acc, g);
  });
  Dims limit;
  for (int64_t d = 0; d < r; ++d) limit.push_back(a.padding_low[size_t(d)] + ot.shape[d]);
  return c.b.slice(acc, a.padding_low, limit);
}

}  // namespace

Grads vjp_reduce_window(const RuleCtx& c) {
  const ir::Attrs& a = c.n.attrs;
  const ir::TensorType ot = c.type(c.operand(0));
  const Shape cs = c.type(c.out).shape;
  if (ot.shape.numel() == 0 || cs.numel() == 0) return {c.zeros(ot)};
  const int64_t r = ot.shape.rank();
  if (a.reduce_kind != ReduceKind::sum) {
    bool dilated_window = false;
    for (int64_t i = 0; i < r; ++i) {
      if (a.base_dilations[size_t(i)] != 1)
        fail("autodiff: no VJP of reduce_window {} with base dilations (dim {}: {})",
             ir::name(a.reduce_kind), i, a.base_dilations[size_t(i)]);
      dilated_window = dilated_window || a.window_dilations[size_t(i)] != 1;
    }
    if (dilated_window) return {chooser_by_offsets(c)};
    const ir::Comparison sel =
        a.reduce_kind == ReduceKind::max ? ir::Comparison::GE : ir::Comparison::LE;
    return {c.b.select_and_scatter(c.operand(0), c.ct, sel, a.window_dimensions, a.window_strides,
                                   a.padding_low, a.padding_high)};
  }
  // Each operand element gets the cotangents of the windows that cover it: pad the cotangent
  // so that a window sliding with stride = base dilation over it meets exactly those.
  Dims interior, plo, phi, slo, shi;
  bool cut = false;
  for (int64_t i = 0; i < r; ++i) {
    const size_t k = size_t(i);
    const int64_t span = dilated(a.window_dimensions[k], a.window_dilations[k]);
    const int64_t before = span - 1 - a.padding_low[k];
    const int64_t after = dilated(ot.shape[i], a.base_dilations[k]) + span - 1 -
                          dilated(cs[i], a.window_strides[k]) - before;
    interior.push_back(a.window_strides[k] - 1);
    // Negative edges (padding beyond the window's reach) are cut after padding.
    plo.push_back(std::max<int64_t>(before, 0));
    phi.push_back(std::max<int64_t>(after, 0));
    slo.push_back(std::max<int64_t>(-before, 0));
    shi.push_back(std::max<int64_t>(-after, 0));
    cut = cut || before < 0 || after < 0;
  }
  ValueId g = c.b.pad(c.ct, c.b.scalar(ot.dtype, 0), plo, phi, interior);
  if (cut) {
    const Shape ps = c.type(g).shape;
    Dims limit;
    for (int64_t i = 0; i < r; ++i) limit.push_back(ps[i] - shi[size_t(i)]);
    g = c.b.slice(g, slo, limit);
  }
  return {c.b.reduce_window(g, ReduceKind::sum, a.window_dimensions, a.base_dilations, {}, {}, {},
                            a.window_dilations)};
}

}  // namespace tlaloc::autodiff::detail
