// tlaloc.rms_norm and tlaloc.rms_norm_grad: RMS normalization over the last dim (Zhang &
// Sennrich 2019; torch.nn.functional.rms_norm with normalized_shape = (D,)).
//
// rms_norm (x [..., D], weight [D]?) {epsilon} -> y (x's type)
//   f32 / f64. y = x · rsqrt(mean(x²) + epsilon) (· weight), the mean over the last dim.
// rms_norm_grad (x, [weight,] d_y) {epsilon} -> (d_x [..., D][, d_weight [D]])
//   with r = rsqrt(mean(x²) + eps), xhat = x·r, g = d_y·weight (d_y without one):
//   d_x = r·(g - xhat·mean(g·xhat)), d_weight = Σrows d_y·xhat. Its own VJP is its
//   decomposition's.
// Host kernels: per row the mean of squares in 8 interleaved partials added pairwise, then
// r = 1 / sqrt(ms + eps); the gradient recomputes r and sums d_weight per fixed chunk of rows,
// the chunks added in order (norm_common.h): results do not depend on the thread count.
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

// ---- type rule: x, then weight [D] when 2 (forward) / 3 (gradient) operands, then d_y -------

std::vector<TensorType> infer_impl(std::span<const TensorType> in, const ir::Attrs& a, bool grad) {
  const TensorType& x = in[0];
  const TensorType w = norm_weight_type(x);
  const bool weighted = in.size() == (grad ? 3u : 2u);
  if (weighted && in[1] != w) fail("weight must be {}, got {}", to_string(w), to_string(in[1]));
  if (grad && in.back() != x) fail("d_y must be {}, got {}", to_string(x), to_string(in.back()));
  const double eps = a.params[kEpsilon];
  if (!(eps >= 0) || eps == HUGE_VAL) fail("epsilon {} must be finite and >= 0", eps);
  if (!grad) return {x};
  if (weighted) return {x, w};
  return {x};
}

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs& a) {
  return infer_impl(in, a, false);
}
std::vector<TensorType> infer_grad(std::span<const TensorType> in, const ir::Attrs& a) {
  return infer_impl(in, a, true);
}

// ---- decomposition --------------------------------------------------------------------------

Tensor rstd(const Tensor& x, double eps) { return rsqrt(mean(square(x), {-1}, true) + eps); }

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node& n, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]);
  Tensor y = x * rstd(x, n.attrs.params[kEpsilon]);
  if (ops.size() == 2) y = y * Tensor(&b, ops[1]);
  return {y.id()};
}

std::vector<ValueId> decompose_grad(ir::Builder& b, const ir::Node& n,
                                    std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]), dy(&b, ops.back());
  const bool weighted = ops.size() == 3;
  const Tensor r = rstd(x, n.attrs.params[kEpsilon]), xhat = x * r;
  const Tensor g = weighted ? dy * Tensor(&b, ops[1]) : dy;
  const Tensor dx = r * (g - xhat * mean(g * xhat, {-1}, true));
  if (!weighted) return {dx.id()};
  std::vector<int64_t> rows;  // the leading dims, summed over for d_weight
  for (int64_t i = 0; i + 1 < x.rank(); ++i) rows.push_back(i);
  const Tensor dw = rows.empty() ? dy * xhat : sum(dy * xhat, rows);
  return {dx.id(), dw.id()};
}

// ---- VJP: the rms_norm_grad composite -------------------------------------------------------

std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  const ir::Node& n = c.n;
  std::vector<ValueId> ops(n.operands.begin(), n.operands.end());
  ops.push_back(c.ct);
  std::vector<ValueId> g = c.b.composite(Op::rms_norm_grad, ops, n.attrs.params);
  std::vector<ValueId> out(n.operands.size(), -1);
  for (size_t i = 0; i < n.operands.size(); ++i)
    if (c.need[i]) out[i] = g[i];
  return out;
}

// ---- host kernels ---------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct RmsNormKernel : Kernel {
  int32_t x = -1, w = -1, dy = -1;
  int32_t y = -1, dw = -1;  // results: y, or d_x (in y) and d_weight
  int64_t R = 0, D = 0;
  double eps = 0;
  bool grad = false, parallel = false;
};

template <class F>
__attribute__((always_inline)) inline F row_rstd(const F* x, int64_t D, F eps) {
  const F ms = sum_pairwise<F>(D, [&](int64_t i) { return x[i] * x[i]; }) / F(D);
  return F(1) / std::sqrt(ms + eps);
}

template <class F>
TLALOC_CLONES void forward_rows(const RmsNormKernel& k, const Frame& fr, int64_t r0, int64_t r1) {
  const F* W = k.w >= 0 ? static_cast<const F*>(fr.ptr[k.w]) : nullptr;
  for (int64_t r = r0; r < r1; ++r) {
    const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * k.D;
    F* y = static_cast<F*>(fr.ptr[k.y]) + r * k.D;
    const F s = row_rstd(x, k.D, F(k.eps));
    if (W)
      for (int64_t i = 0; i < k.D; ++i) y[i] = x[i] * s * W[i];
    else
      for (int64_t i = 0; i < k.D; ++i) y[i] = x[i] * s;
  }
}

// Chunks [c0, c1): d_x rows, and per chunk the partial d_weight row in `part`.
template <class F>
TLALOC_CLONES void backward_chunks(const RmsNormKernel& k, const Frame& fr, int64_t c0, int64_t c1,
                                   F* part) {
  const int64_t D = k.D;
  const F* W = k.w >= 0 ? static_cast<const F*>(fr.ptr[k.w]) : nullptr;
  for (int64_t c = c0; c < c1; ++c) {
    F* pw = part + c * D;
    if (W) std::fill(pw, pw + D, F(0));
    for (int64_t r = c * kChunkRows; r < std::min(k.R, (c + 1) * kChunkRows); ++r) {
      const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * D;
      const F* dy = static_cast<const F*>(fr.ptr[k.dy]) + r * D;
      F* dx = static_cast<F*>(fr.ptr[k.y]) + r * D;
      const F s = row_rstd(x, D, F(k.eps));
      auto g = [&](int64_t i) { return W ? dy[i] * W[i] : dy[i]; };
      const F mgx = sum_pairwise<F>(D, [&](int64_t i) { return g(i) * (x[i] * s); }) / F(D);
      for (int64_t i = 0; i < D; ++i) {
        const F xhat = x[i] * s;
        if (W) pw[i] += dy[i] * xhat;
        dx[i] = s * (g(i) - xhat * mgx);
      }
    }
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<RmsNormKernel>(kk);
  const int64_t n = row_chunks(k.R);
  F* part = reinterpret_cast<F*>(fr.scratch);
  const int nt =
      k.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, n)) : 1;
  runtime::host::parallel(nt, [&](int p, int P) {
    const int64_t c0 = n * p / P, c1 = n * (p + 1) / P;
    if (k.grad)
      backward_chunks<F>(k, fr, c0, c1, part);
    else
      forward_rows<F>(k, fr, std::min(k.R, c0 * kChunkRows), std::min(k.R, c1 * kChunkRows));
  });
  if (k.grad && k.dw >= 0) add_chunks(part, n, k.D, 0, k.D, static_cast<F*>(fr.ptr[k.dw]));
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<RmsNormKernel>();
  const Shape& xs = f.type(n.operands[0]).shape;
  k->grad = n.op == Op::rms_norm_grad;
  k->x = n.operands[0];
  if (n.operands.size() == (k->grad ? 3u : 2u)) k->w = n.operands[1];
  k->y = id;
  if (k->grad) {
    k->dy = n.operands.back();
    if (k->w >= 0) {
      k->y = id + 1;
      k->dw = id + 2;
    }
  }
  k->D = xs[xs.rank() - 1];
  k->R = 1;
  for (int64_t i = 0; i + 1 < xs.rank(); ++i) k->R *= xs[i];
  k->eps = n.attrs.params[kEpsilon];
  k->parallel = num_threads != 1 && k->R * k->D >= runtime::host::kParallelElements;
  const int64_t elem = n.type.dtype == DType::f64 ? 8 : 4;
  if (k->dw >= 0) k->scratch_bytes = row_chunks(k->R) * k->D * elem;
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = ir::results_of(f, id);
  k->run = n.type.dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

// ---- examples for the record-walking tests --------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  ir::Attrs a, b;
  a.params = {1e-6};
  b.params = {0.5};
  const TensorType x{DType::f32, Shape{3, 20, 9}}, w{DType::f32, Shape{9}};
  const TensorType y{DType::f64, Shape{5}};
  return {{{x, w}, a}, {{y}, b}};
}

std::vector<ir::CompositeExample> examples_grad() {
  ir::Attrs a;
  a.params = {1e-5};
  const TensorType x{DType::f32, Shape{3, 20, 9}}, w{DType::f32, Shape{9}};
  const TensorType y{DType::f64, Shape{2, 7}};
  return {{{x, w, x}, a}, {{y, y}, a}};
}

}  // namespace

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  std::vector<Tensor> ops{x};
  if (weight) ops.push_back(*weight);
  return call(Op::rms_norm, ops, {eps})[0];
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(rms_norm, "tlaloc.rms_norm", 1, 2, {"epsilon"}, composites::infer,
                        composites::decompose, composites::vjp, composites::make_kernel,
                        composites::examples)
TLALOC_COMPOSITE_RECORD(rms_norm_grad, "tlaloc.rms_norm_grad", 2, 3, {"epsilon"},
                        composites::infer_grad, composites::decompose_grad, nullptr,
                        composites::make_kernel, composites::examples_grad)
