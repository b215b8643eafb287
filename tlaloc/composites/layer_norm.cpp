// tlaloc.layer_norm and tlaloc.layer_norm_grad: layer normalization over the last dim (Ba et al.
// 2016; torch.nn.functional.layer_norm with normalized_shape = (D,)).
//
// layer_norm (x [..., D], weight [D], bias [D]?) {epsilon} -> y (x's type)
//   f32 / f64. y = (x - mean)·rsqrt(var + epsilon)·weight (+ bias), mean and biased variance of
//   each row. The decomposition is the corrected two-pass algorithm (Chan, Golub & LeVeque
//   1983): m = mean(x), then in one pass over d = x - m both c = mean(d) and mean(d²); var =
//   max(mean(d²) - c², 0), centred values d - c. Two dependent reductions (kernels on XLA), the
//   textbook two-pass form's count, and exact for rows with a large mean.
// layer_norm_grad (x, weight, d_y) {epsilon} -> (d_x [..., D], d_weight [D], d_bias [D])
//   with xhat = (x - mean)·rstd, g = d_y·weight: d_x = rstd·(g - mean(g) - xhat·mean(g·xhat)),
//   d_weight = Σrows d_y·xhat, d_bias = Σrows d_y. Its own VJP is its decomposition's.
// Host kernels: per row the mean, then the variance of the centred values (corrected two-pass:
// the centred values are centred again by their mean), rstd = 1 / sqrt(var + eps); the same
// statistics within rounding, and exact for any mean. The gradient recomputes each row's
// statistics; d_weight and d_bias are summed per fixed chunk of kChunkRows rows and the chunks
// added in order. Row sums use 8 interleaved partials added pairwise. Every order is fixed by the
// shapes, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/composites/norm_common.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::composites {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;
enum Param { kEpsilon };

// ---- type rule ----------------------------------------------------------------------------

std::vector<TensorType> infer_impl(std::span<const TensorType> in, const ir::Attrs& a, bool grad) {
  const TensorType& x = in[0];
  const TensorType w = norm_weight_type(x);
  if (in[1] != w) fail("weight must be {}, got {}", to_string(w), to_string(in[1]));
  if (grad && in[2] != x) fail("d_y must be {}, got {}", to_string(x), to_string(in[2]));
  if (!grad && in.size() == 3 && in[2] != w)
    fail("bias must be {}, got {}", to_string(w), to_string(in[2]));
  const double eps = a.params[kEpsilon];
  if (!(eps >= 0) || eps == HUGE_VAL) fail("epsilon {} must be finite and >= 0", eps);
  if (grad) return {x, w, w};
  return {x};
}

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs& a) {
  return infer_impl(in, a, false);
}
std::vector<TensorType> infer_grad(std::span<const TensorType> in, const ir::Attrs& a) {
  return infer_impl(in, a, true);
}

// ---- decomposition ------------------------------------------------------------------------

// A row's centred values and biased variance in two passes, the corrected two-pass algorithm
// (Chan, Golub & LeVeque 1983): m = mean(x); then, from one pass over x - m, its mean c (m's
// rounding error) and mean square q: var = max(q - c², 0), centred values (x - m) - c. Exact for
// any mean and any first value; the second pass's two sums read the same input (one reduction
// kernel on XLA), so a row takes two dependent reductions, as the textbook two-pass form.
struct RowStats {
  Tensor xc, var;
};

RowStats row_stats(const Tensor& x) {
  Tensor d = x - mean(x, {-1}, true);
  Tensor c = mean(d, {-1}, true);
  Tensor var = maximum(mean(square(d), {-1}, true) - square(c), zeros_like(c));
  return {d - c, var};
}

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node& n, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]), w(&b, ops[1]);
  const RowStats s = row_stats(x);
  Tensor y = s.xc * rsqrt(s.var + n.attrs.params[kEpsilon]) * w;
  if (ops.size() == 3) y = y + Tensor(&b, ops[2]);
  return {y.id()};
}

std::vector<ValueId> decompose_grad(ir::Builder& b, const ir::Node& n,
                                    std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]), w(&b, ops[1]), dy(&b, ops[2]);
  std::vector<int64_t> rows;  // the leading dims, summed over for d_weight and d_bias
  for (int64_t i = 0; i + 1 < x.rank(); ++i) rows.push_back(i);
  const RowStats s = row_stats(x);
  Tensor rstd = rsqrt(s.var + n.attrs.params[kEpsilon]);
  Tensor xhat = s.xc * rstd, g = dy * w;
  Tensor dx = rstd * (g - mean(g, {-1}, true) - xhat * mean(g * xhat, {-1}, true));
  Tensor dw = dy * xhat, db = dy;
  if (!rows.empty()) {
    dw = sum(dw, rows);
    db = sum(db, rows);
  }
  return {dx.id(), dw.id(), db.id()};
}

// ---- VJP: the layer_norm_grad composite ---------------------------------------------------

std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  const ir::Node& n = c.n;
  std::vector<ValueId> g =
      c.b.composite(Op::layer_norm_grad, {c.operand(0), c.operand(1), c.ct}, n.attrs.params);
  std::vector<ValueId> out(n.operands.size(), -1);
  for (size_t i = 0; i < n.operands.size(); ++i)
    if (c.need[i]) out[i] = g[i];
  return out;
}

// ---- host kernels ---------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct LayerNormKernel : Kernel {
  int32_t x = -1, w = -1, b = -1, dy = -1;
  int32_t y = -1, dw = -1, db = -1;  // results: y, or d_x (in y), d_weight, d_bias
  int64_t R = 0, D = 0;
  double eps = 0;
  bool parallel = false;
  int64_t chunks() const { return row_chunks(R); }
};

// Writes x - mean to c; returns rstd. Corrected two-pass, so a long f32 row with a large mean is
// centred as exactly as the decomposition's (whose sums are pairwise).
template <class F>
__attribute__((always_inline)) inline F centre(const F* x, F* c, int64_t D, F eps) {
  const F mean = sum_pairwise<F>(D, [&](int64_t i) { return x[i]; }) / F(D);
  for (int64_t i = 0; i < D; ++i) c[i] = x[i] - mean;
  const F corr = sum_pairwise<F>(D, [&](int64_t i) { return c[i]; }) / F(D);
  for (int64_t i = 0; i < D; ++i) c[i] -= corr;
  const F var = sum_pairwise<F>(D, [&](int64_t i) { return c[i] * c[i]; }) / F(D);
  return F(1) / std::sqrt(var + eps);
}

template <class F>
TLALOC_CLONES void forward_rows(const LayerNormKernel& k, const Frame& fr, int64_t r0, int64_t r1) {
  const int64_t D = k.D;
  const F* W = static_cast<const F*>(fr.ptr[k.w]);
  const F* B = k.b >= 0 ? static_cast<const F*>(fr.ptr[k.b]) : nullptr;
  const F eps = F(k.eps);
  for (int64_t r = r0; r < r1; ++r) {
    const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * D;
    F* y = static_cast<F*>(fr.ptr[k.y]) + r * D;
    const F rstd = centre(x, y, D, eps);
    if (B)
      for (int64_t i = 0; i < D; ++i) y[i] = y[i] * rstd * W[i] + B[i];
    else
      for (int64_t i = 0; i < D; ++i) y[i] = y[i] * rstd * W[i];
  }
}

// Chunks [c0, c1): d_x rows, and per chunk the partial d_weight, d_bias rows in `part`.
template <class F>
TLALOC_CLONES void backward_chunks(const LayerNormKernel& k, const Frame& fr, int64_t c0,
                                   int64_t c1, F* part) {
  const int64_t D = k.D;
  const F* W = static_cast<const F*>(fr.ptr[k.w]);
  const F eps = F(k.eps);
  for (int64_t c = c0; c < c1; ++c) {
    F* pw = part + c * 2 * D;
    F* pb = pw + D;
    std::fill(pw, pw + 2 * D, F(0));
    for (int64_t r = c * kChunkRows; r < std::min(k.R, (c + 1) * kChunkRows); ++r) {
      const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * D;
      const F* dy = static_cast<const F*>(fr.ptr[k.dy]) + r * D;
      F* dx = static_cast<F*>(fr.ptr[k.y]) + r * D;
      const F rstd = centre(x, dx, D, eps);
      for (int64_t i = 0; i < D; ++i) dx[i] = dx[i] * rstd;  // xhat
      const F mg = sum_pairwise<F>(D, [&](int64_t i) { return dy[i] * W[i]; }) / F(D);
      const F mgx = sum_pairwise<F>(D, [&](int64_t i) { return dy[i] * W[i] * dx[i]; }) / F(D);
      for (int64_t i = 0; i < D; ++i) {
        pw[i] += dy[i] * dx[i];
        pb[i] += dy[i];
        dx[i] = rstd * ((dy[i] * W[i] - mg) - dx[i] * mgx);
      }
    }
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<LayerNormKernel>(kk);
  const bool grad = k.dy >= 0;
  const int64_t n = k.chunks();
  F* part = reinterpret_cast<F*>(fr.scratch);
  const int nt =
      k.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, n)) : 1;
  runtime::host::parallel(nt, [&](int p, int P) {
    const int64_t c0 = n * p / P, c1 = n * (p + 1) / P;
    if (grad)
      backward_chunks<F>(k, fr, c0, c1, part);
    else
      forward_rows<F>(k, fr, std::min(k.R, c0 * kChunkRows), std::min(k.R, c1 * kChunkRows));
  });
  if (!grad) return;
  add_chunks(part, n, 2 * k.D, 0, k.D, static_cast<F*>(fr.ptr[k.dw]));
  add_chunks(part, n, 2 * k.D, k.D, k.D, static_cast<F*>(fr.ptr[k.db]));
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<LayerNormKernel>();
  const Shape& xs = f.type(n.operands[0]).shape;
  k->x = n.operands[0];
  k->w = n.operands[1];
  k->y = id;
  if (n.op == Op::layer_norm_grad) {
    k->dy = n.operands[2];
    k->y = id + 1;
    k->dw = id + 2;
    k->db = id + 3;
  } else if (n.operands.size() == 3) {
    k->b = n.operands[2];
  }
  k->D = xs[xs.rank() - 1];
  k->R = 1;
  for (int64_t i = 0; i + 1 < xs.rank(); ++i) k->R *= xs[i];
  k->eps = n.attrs.params[kEpsilon];
  k->parallel = num_threads != 1 && k->R * k->D >= runtime::host::kParallelElements;
  const size_t elem = n.type.dtype == DType::f64 ? 8 : 4;
  if (k->dy >= 0) k->scratch_bytes = k->chunks() * 2 * k->D * int64_t(elem);
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = ir::results_of(f, id);
  k->run = n.type.dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

// ---- examples for the record-walking tests ------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  ir::Attrs a, b;
  a.params = {1e-5};
  b.params = {0.25};
  const TensorType x{DType::f32, Shape{3, 4, 5}}, w{DType::f32, Shape{5}};
  const TensorType y{DType::f64, Shape{2, 7}}, v{DType::f64, Shape{7}};
  return {{{x, w, w}, a}, {{y, v}, b}};
}

std::vector<ir::CompositeExample> examples_grad() {
  ir::Attrs a;
  a.params = {1e-3};
  const TensorType x{DType::f32, Shape{3, 4, 5}}, w{DType::f32, Shape{5}};
  const TensorType y{DType::f64, Shape{2, 7}}, v{DType::f64, Shape{7}};
  return {{{x, w, x}, a}, {{y, v, y}, a}};
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                  double eps) {
  std::vector<Tensor> ops{x, weight};
  if (bias) ops.push_back(*bias);
  return call(Op::layer_norm, ops, {eps})[0];
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(layer_norm, "tlaloc.layer_norm", 2, 3, {"epsilon"}, composites::infer,
                        composites::decompose, composites::vjp, composites::make_kernel,
                        composites::examples)
TLALOC_COMPOSITE_RECORD(layer_norm_grad, "tlaloc.layer_norm_grad", 3, 3, {"epsilon"},
                        composites::infer_grad, composites::decompose_grad, nullptr,
                        composites::make_kernel, composites::examples_grad)
