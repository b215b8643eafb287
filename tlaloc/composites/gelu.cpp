// tlaloc.gelu and tlaloc.gelu_grad: GELU's tanh approximation (Hendrycks & Gimpel 2016;
// torch.nn.GELU(approximate="tanh")).
//
// gelu (x) -> x's type, f32 / f64: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
// gelu_grad (x, y, d_y) -> x's type, from the forward's result y = gelu(x): with q = 1 + t = 2y / x
//   (1 where |x| < 2^-60, where 1 + t rounds to 1), d_y·(0.5q + 0.5x·q(2 - q)·√(2/π)(1 +
//   3·0.044715x²)), the derivative 0.5(1 + t) + 0.5x(1 - t²)·du/dx with no tanh to recompute.
//   Its own VJP (second derivatives) takes y to be gelu(x): y gets none, x all of d_y·gelu''(x).
// Host kernels, one pass over the elements; each op is one IEEE operation in the decomposition's
// order (no FMA), and tanh is the fused loops' own for f32 (ir/scalar.h: tanh_f32), so the
// forward is bitwise the unfused loops'.
#include <cmath>
#include <numbers>

#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/ir/scalar.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::composites {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;

// ---- type rule: x f32 / f64; gelu_grad also y and d_y of x's type --------------------------

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs&) {
  if (in[0].dtype != DType::f32 && in[0].dtype != DType::f64)
    fail("needs f32 or f64 x, got {}", name(in[0].dtype));
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] != in[0])
      fail("{} must be {}, got {}", i == 1 ? "y" : "d_y", to_string(in[0]), to_string(in[i]));
  return {in[0]};
}

// ---- decomposition ------------------------------------------------------------------------

Tensor gelu_decomposed(const Tensor& x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node&, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  return {gelu_decomposed(Tensor(&b, ops[0])).id()};
}

// x is replaced by 1 where q is 1, so the unselected 2y / 0 leaks no NaN into second derivatives.
std::vector<ValueId> decompose_grad(ir::Builder& b, const ir::Node&, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]), y(&b, ops[1]), dy(&b, ops[2]);
  const double c = std::sqrt(2.0 / std::numbers::pi);
  Tensor small = abs(x) < std::ldexp(1.0, -60), one = ones_like(x);
  Tensor q = where(small, one, (y + y) / where(small, one, x));
  Tensor du = c * (1.0 + (3 * 0.044715) * (x * x));
  return {(dy * (0.5 * q + ((0.5 * x) * (q * (2.0 - q))) * du)).id()};
}

// ---- VJP ----------------------------------------------------------------------------------

// gelu: x's cotangent is one gelu_grad composite, reading the forward's result.
std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  std::vector<ValueId> out(1, -1);
  if (c.need[0]) out[0] = c.b.composite(Op::gelu_grad, {c.operand(0), c.out, c.ct})[0];
  return out;
}

// gelu_grad(x, y, d_y), y = gelu(x) as vjp emits it. d_y's cotangent is gelu_grad(x, y, ct);
// x's is ct·d_y·gelu''(x) with t = tanh(u) recomputed from x, gelu''(x) = (1 - t²)(u' - x·t·u'²
// + 3·0.044715·√(2/π)·x²), u = √(2/π)(x + 0.044715x³), u' = √(2/π)(1 + 3·0.044715x²); y's is 0.
// Through the decomposition instead, x's second derivative was a sum of 2/x-sized terms through
// q = 2y / x that cancel (all f32 bits lost below |x| ~ 1e-6), and half of gelu''(0) where q is
// the constant 1.
std::vector<ValueId> vjp_grad(const autodiff::detail::RuleCtx& c) {
  std::vector<ValueId> out(3, -1);
  if (c.need[2]) out[2] = c.b.composite(Op::gelu_grad, {c.operand(0), c.operand(1), c.ct})[0];
  if (c.need[0]) {
    trace::BuilderScope scope(c.b);
    const double k = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
    const Tensor x = c.x(0), x2 = x * x;
    const Tensor t = tanh(k * (x + a * x2 * x)), du = k * (1.0 + (3 * a) * x2);
    const Tensor h = (1.0 - t * t) * (du - x * t * (du * du) + (3 * a * k) * x2);
    out[0] = (c.ct_t() * c.x(2) * h).id();
  }
  return out;
}

// ---- host kernels ---------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct GeluKernel : Kernel {
  int32_t x = -1, y = -1, dy = -1, res = -1;
  int64_t n = 0;
  bool parallel = false;
};

template <class F>
TLALOC_CLONES void span(const GeluKernel& k, const Frame& fr, int64_t i0, int64_t i1) {
  const F c = F(std::sqrt(2.0 / std::numbers::pi)), a = F(0.044715), a3 = F(3 * 0.044715);
  const F half = F(0.5), one = F(1);
  const F* x = static_cast<const F*>(fr.ptr[k.x]);
  F* r = static_cast<F*>(fr.ptr[k.res]);
  if (k.dy < 0) {
    for (int64_t i = i0; i < i1; ++i) {
      const F v = x[i];
      const F t = ir::scalar::ftanh(c * (v + a * v * v * v));
      r[i] = (half * v) * (one + t);
    }
    return;
  }
  const F* y = static_cast<const F*>(fr.ptr[k.y]);
  const F* dy = static_cast<const F*>(fr.ptr[k.dy]);
  const F tiny = F(std::ldexp(1.0, -60)), two = F(2);
  for (int64_t i = i0; i < i1; ++i) {
    const F v = x[i];
    const bool small = std::fabs(v) < tiny;
    const F q = small ? one : (y[i] + y[i]) / (small ? one : v);
    const F du = c * (one + a3 * (v * v));
    r[i] = dy[i] * (half * q + ((half * v) * (q * (two - q))) * du);
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<GeluKernel>(kk);
  // Parts of whole 64-element runs, so every vector loop but the last runs full.
  const int64_t units = (k.n + 63) / 64;
  const int nt =
      k.parallel
          ? int(std::min<int64_t>(int64_t(fr.num_threads) * runtime::host::kPartsPerThread, units))
          : 1;
  runtime::host::parallel(nt, [&](int p, int P) {
    span<F>(k, fr, std::min(k.n, units * p / P * 64), std::min(k.n, units * (p + 1) / P * 64));
  });
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<GeluKernel>();
  k->x = n.operands[0];
  if (n.op == Op::gelu_grad) {
    k->y = n.operands[1];
    k->dy = n.operands[2];
  }
  k->res = id;
  k->n = f.type(k->x).shape.numel();
  k->parallel = num_threads != 1 && k->n >= runtime::host::kParallelElements;
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = {id};
  k->run = f.type(k->x).dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

// ---- examples for the record-walking tests ------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  return {{{TensorType{DType::f32, Shape{2, 5}}}, {}}, {{TensorType{DType::f64, Shape{7}}}, {}}};
}

std::vector<ir::CompositeExample> examples_grad() {
  const TensorType x{DType::f64, Shape{2, 5}};
  return {{{x, x, x}, {}}};
}

}  // namespace

Tensor gelu(const Tensor& x) {
  if (!is_floating(x.dtype())) fail("gelu: needs a floating x, got {}", to_string(x.type()));
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64) return gelu_decomposed(x);
  return call(Op::gelu, {x})[0];
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(gelu, "tlaloc.gelu", 1, 1, {}, composites::infer, composites::decompose,
                        composites::vjp, composites::make_kernel, composites::examples)
TLALOC_COMPOSITE_RECORD(gelu_grad, "tlaloc.gelu_grad", 3, 3, {}, composites::infer,
                        composites::decompose_grad, composites::vjp_grad, composites::make_kernel,
                        composites::examples_grad)
