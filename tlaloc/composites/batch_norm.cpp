// tlaloc.batch_norm and tlaloc.batch_norm_grad: batch normalization with batch statistics (Ioffe
// & Szegedy 2015; torch.nn.functional.batch_norm with training=True) over every dim of x but 1.
//
// batch_norm (x [N, C, ...], weight [C]?, bias [C]?) {epsilon} -> (y, mean [C], var [C])
//   f32 / f64; 1 operand, or 3 (affine). With n = numel / C elements per channel: the mean and
//   the biased variance of the centred values (two-pass), y = (x - mean)·rsqrt(var + eps)
//   (·weight + bias).
// batch_norm_grad (x, mean, var, d_y, weight?) {epsilon} -> (d_x[, d_weight, d_bias])
//   with r = rsqrt(var + eps), xhat = (x - mean)·r, and sums over each channel's n elements:
//   d_bias = Σ d_y, d_weight = Σ d_y·xhat, d_x = weight·r·(d_y - d_bias/n - xhat·d_weight/n)
//   (weight 1 without one). Its own VJP is its decomposition's.
// The VJP of batch_norm also takes cotangents of mean and var when a loss reads them:
//   d_x += d_mean/n + d_var·2(x - mean)/n.
// Host kernels: each channel's sums by one thread (rows of the trailing dims in 8 interleaved
// partials, the rows added in order), so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/composites/sum8.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::composites {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;
enum Param { kEpsilon };

// ---- type rules -----------------------------------------------------------------------------

TensorType channel_type(const TensorType& x) {
  if (x.dtype != DType::f32 && x.dtype != DType::f64)
    fail("needs f32 or f64, got {}", name(x.dtype));
  if (x.shape.rank() < 2) fail("x must be [N, C, ...], got {}", to_string(x));
  return {x.dtype, Shape{x.shape[1]}};
}

void check_eps(const ir::Attrs& a) {
  const double eps = a.params[kEpsilon];
  if (!(eps >= 0) || eps == HUGE_VAL) fail("epsilon {} must be finite and >= 0", eps);
}

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs& a) {
  const TensorType c = channel_type(in[0]);
  if (in.size() == 2) fail("takes x alone or x, weight and bias");
  for (size_t k = 1; k < in.size(); ++k)
    if (in[k] != c)
      fail("{} must be {}, got {}", k == 1 ? "weight" : "bias", to_string(c), to_string(in[k]));
  check_eps(a);
  return {in[0], c, c};
}

std::vector<TensorType> infer_grad(std::span<const TensorType> in, const ir::Attrs& a) {
  const TensorType c = channel_type(in[0]);
  const char* names[] = {"x", "mean", "var", "d_y", "weight"};
  for (size_t k = 1; k < in.size(); ++k) {
    const TensorType& want = k == 3 ? in[0] : c;
    if (in[k] != want) fail("{} must be {}, got {}", names[k], to_string(want), to_string(in[k]));
  }
  check_eps(a);
  if (in.size() == 5) return {in[0], c, c};
  return {in[0]};
}

// ---- decompositions -------------------------------------------------------------------------

struct Dims {
  std::vector<int64_t> axes, keep;  // every dim but 1; [1, C, 1...]
  double n = 1;
};
Dims dims_of(const Tensor& x) {
  Dims d;
  d.keep.assign(size_t(x.rank()), 1);
  d.keep[1] = x.dim(1);
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != 1) {
      d.axes.push_back(i);
      d.n *= double(x.dim(i));
    }
  return d;
}

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node& n, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]);
  const Dims d = dims_of(x);
  const Tensor mean = trace::mean(x, d.axes);
  const Tensor xc = x - trace::reshape(mean, d.keep);
  const Tensor var = trace::mean(trace::square(xc), d.axes);
  const Tensor r = trace::rsqrt(var + n.attrs.params[kEpsilon]);
  Tensor y = xc * trace::reshape(r, d.keep);
  if (ops.size() == 3)
    y = y * trace::reshape(Tensor(&b, ops[1]), d.keep) + trace::reshape(Tensor(&b, ops[2]), d.keep);
  return {y.id(), mean.id(), var.id()};
}

std::vector<ValueId> decompose_grad(ir::Builder& b, const ir::Node& n,
                                    std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]), mean(&b, ops[1]), var(&b, ops[2]), dy(&b, ops[3]);
  const Dims d = dims_of(x);
  const Tensor r = trace::rsqrt(var + n.attrs.params[kEpsilon]);
  const Tensor xhat = (x - trace::reshape(mean, d.keep)) * trace::reshape(r, d.keep);
  const Tensor dbias = trace::sum(dy, d.axes), dweight = trace::sum(dy * xhat, d.axes);
  const bool weighted = ops.size() == 5;
  const Tensor scale = weighted ? Tensor(&b, ops[4]) * r : r;
  const Tensor dx = trace::reshape(scale, d.keep) * (dy - trace::reshape(dbias / d.n, d.keep) -
                                                     xhat * trace::reshape(dweight / d.n, d.keep));
  if (!weighted) return {dx.id()};
  return {dx.id(), dweight.id(), dbias.id()};
}

// ---- VJP: the batch_norm_grad composite, plus the cotangents of mean and var ----------------

std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  const ir::Node& n = c.n;
  const bool weighted = n.operands.size() == 3;
  const Tensor x = c.x(0), mean = c.t(c.outs[1]);
  ValueId dy = c.cts[0] >= 0 ? c.cts[0] : c.zeros(c.type(c.outs[0]));
  std::vector<ValueId> ops{n.operands[0], c.outs[1], c.outs[2], dy};
  if (weighted) ops.push_back(n.operands[1]);
  std::vector<ValueId> g = c.b.composite(Op::batch_norm_grad, ops, n.attrs.params);
  ValueId dx = g[0];
  if (c.cts[1] >= 0 || c.cts[2] >= 0) {
    trace::BuilderScope scope(c.b);
    const Dims d = dims_of(x);
    Tensor extra = trace::zeros_like(x);
    if (c.cts[1] >= 0) extra = extra + trace::reshape(c.t(c.cts[1]) / d.n, d.keep);
    if (c.cts[2] >= 0)
      extra = extra + (x - trace::reshape(mean, d.keep)) *
                          trace::reshape(c.t(c.cts[2]) * (2 / d.n), d.keep);
    dx = (c.t(dx) + extra).id();
  }
  std::vector<ValueId> out(n.operands.size(), -1);
  if (c.need[0]) out[0] = dx;
  if (weighted) {
    if (c.need[1]) out[1] = g[1];
    if (c.need[2]) out[2] = g[2];
  }
  return out;
}

// ---- host kernels ---------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct BatchNormKernel : Kernel {
  int32_t x = -1, w = -1, b = -1, dy = -1, mean_in = -1, var_in = -1;
  int32_t y = -1, mean = -1,
          var = -1;             // forward results; gradient: d_x in y, d_w in mean, d_b in var
  int64_t N = 0, C = 0, S = 0;  // x viewed as [N, C, S]
  double eps = 0;
  bool grad = false, parallel = false;
};

// Channel c's rows: x + (i·C + c)·S for i < N.
template <class F>
TLALOC_CLONES void stats(const BatchNormKernel& k, const Frame& fr, int64_t c0, int64_t c1) {
  const F* X = static_cast<const F*>(fr.ptr[k.x]);
  F* M = static_cast<F*>(fr.ptr[k.mean]);
  F* V = static_cast<F*>(fr.ptr[k.var]);
  const F n = F(k.N * k.S);
  for (int64_t c = c0; c < c1; ++c) {
    F s = 0;
    for (int64_t i = 0; i < k.N; ++i) {
      const F* row = X + (i * k.C + c) * k.S;
      s += sum8<F>(k.S, [&](int64_t j) { return row[j]; });
    }
    const F m = s / n;
    F q = 0;
    for (int64_t i = 0; i < k.N; ++i) {
      const F* row = X + (i * k.C + c) * k.S;
      q += sum8<F>(k.S, [&](int64_t j) { return (row[j] - m) * (row[j] - m); });
    }
    M[c] = m;
    V[c] = q / n;
  }
}

template <class F>
TLALOC_CLONES void normalize_rows(const BatchNormKernel& k, const Frame& fr, int64_t r0,
                                  int64_t r1) {
  const F* X = static_cast<const F*>(fr.ptr[k.x]);
  const F* M = static_cast<const F*>(fr.ptr[k.mean]);
  const F* V = static_cast<const F*>(fr.ptr[k.var]);
  const F* W = k.w >= 0 ? static_cast<const F*>(fr.ptr[k.w]) : nullptr;
  const F* B = k.b >= 0 ? static_cast<const F*>(fr.ptr[k.b]) : nullptr;
  F* Y = static_cast<F*>(fr.ptr[k.y]);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t c = r % k.C;
    const F m = M[c], s = F(1) / std::sqrt(V[c] + F(k.eps));
    const F* x = X + r * k.S;
    F* y = Y + r * k.S;
    if (W) {
      const F w = W[c], b = B[c];
      for (int64_t j = 0; j < k.S; ++j) y[j] = (x[j] - m) * s * w + b;
    } else {
      for (int64_t j = 0; j < k.S; ++j) y[j] = (x[j] - m) * s;
    }
  }
}

// Per channel: d_bias = Σ d_y and d_weight = Σ d_y·xhat (into `sums`: [2, C] when no weight
// result is written).
template <class F>
TLALOC_CLONES void grad_sums(const BatchNormKernel& k, const Frame& fr, int64_t c0, int64_t c1,
                             F* db, F* dw) {
  const F* X = static_cast<const F*>(fr.ptr[k.x]);
  const F* DY = static_cast<const F*>(fr.ptr[k.dy]);
  const F* M = static_cast<const F*>(fr.ptr[k.mean_in]);
  const F* V = static_cast<const F*>(fr.ptr[k.var_in]);
  for (int64_t c = c0; c < c1; ++c) {
    const F m = M[c], s = F(1) / std::sqrt(V[c] + F(k.eps));
    F sb = 0, sw = 0;
    for (int64_t i = 0; i < k.N; ++i) {
      const F* x = X + (i * k.C + c) * k.S;
      const F* dy = DY + (i * k.C + c) * k.S;
      sb += sum8<F>(k.S, [&](int64_t j) { return dy[j]; });
      sw += sum8<F>(k.S, [&](int64_t j) { return dy[j] * ((x[j] - m) * s); });
    }
    db[c] = sb;
    dw[c] = sw;
  }
}

template <class F>
TLALOC_CLONES void grad_rows(const BatchNormKernel& k, const Frame& fr, int64_t r0, int64_t r1,
                             const F* db, const F* dw) {
  const F* X = static_cast<const F*>(fr.ptr[k.x]);
  const F* DY = static_cast<const F*>(fr.ptr[k.dy]);
  const F* M = static_cast<const F*>(fr.ptr[k.mean_in]);
  const F* V = static_cast<const F*>(fr.ptr[k.var_in]);
  const F* W = k.w >= 0 ? static_cast<const F*>(fr.ptr[k.w]) : nullptr;
  F* DX = static_cast<F*>(fr.ptr[k.y]);
  const F n = F(k.N * k.S);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t c = r % k.C;
    const F m = M[c], s = F(1) / std::sqrt(V[c] + F(k.eps));
    const F scale = W ? W[c] * s : s, mb = db[c] / n, mw = dw[c] / n;
    const F* x = X + r * k.S;
    const F* dy = DY + r * k.S;
    F* dx = DX + r * k.S;
    for (int64_t j = 0; j < k.S; ++j) dx[j] = scale * (dy[j] - mb - ((x[j] - m) * s) * mw);
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<BatchNormKernel>(kk);
  const int64_t rows = k.N * k.C;
  auto split = [&](int64_t n, auto&& body) {
    const int nt =
        k.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, n)) : 1;
    runtime::host::parallel(nt, [&](int p, int P) { body(n * p / P, n * (p + 1) / P); });
  };
  if (!k.grad) {
    split(k.C, [&](int64_t c0, int64_t c1) { stats<F>(k, fr, c0, c1); });
    split(rows, [&](int64_t r0, int64_t r1) { normalize_rows<F>(k, fr, r0, r1); });
    return;
  }
  F* scratch = reinterpret_cast<F*>(fr.scratch);
  F* db = k.var >= 0 ? static_cast<F*>(fr.ptr[k.var]) : scratch;
  F* dw = k.mean >= 0 ? static_cast<F*>(fr.ptr[k.mean]) : scratch + k.C;
  split(k.C, [&](int64_t c0, int64_t c1) { grad_sums<F>(k, fr, c0, c1, db, dw); });
  split(rows, [&](int64_t r0, int64_t r1) { grad_rows<F>(k, fr, r0, r1, db, dw); });
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<BatchNormKernel>();
  const Shape& xs = f.type(n.operands[0]).shape;
  k->grad = n.op == Op::batch_norm_grad;
  k->x = n.operands[0];
  k->N = xs[0];
  k->C = xs[1];
  k->S = 1;
  for (int64_t i = 2; i < xs.rank(); ++i) k->S *= xs[i];
  k->eps = n.attrs.params[kEpsilon];
  k->y = id + 1;  // every instance has several results
  if (!k->grad) {
    if (n.operands.size() == 3) {
      k->w = n.operands[1];
      k->b = n.operands[2];
    }
    k->mean = id + 2;
    k->var = id + 3;
  } else {
    k->mean_in = n.operands[1];
    k->var_in = n.operands[2];
    k->dy = n.operands[3];
    if (n.operands.size() == 5) {
      k->w = n.operands[4];
      k->mean = id + 2;  // d_weight
      k->var = id + 3;   // d_bias
    } else {
      k->y = id;  // one result: d_x
    }
  }
  const int64_t elem = f.type(n.operands[0]).dtype == DType::f64 ? 8 : 4;
  k->scratch_bytes = 2 * k->C * elem;
  k->parallel = num_threads != 1 && xs.numel() >= runtime::host::kParallelElements;
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = ir::results_of(f, id);
  k->run = elem == 8 ? run<double> : run<float>;
  return k;
}

// ---- examples for the record-walking tests --------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  ir::Attrs a, b;
  a.params = {1e-5};
  b.params = {0.1};
  const TensorType x{DType::f32, Shape{4, 3, 5, 6}}, c{DType::f32, Shape{3}};
  const TensorType y{DType::f64, Shape{7, 2}};
  return {{{x, c, c}, a},
          {{y}, b},
          {{TensorType{DType::f64, Shape{3, 4, 5}}, {DType::f64, Shape{4}}, {DType::f64, Shape{4}}},
           a}};
}

std::vector<ir::CompositeExample> examples_grad() {
  ir::Attrs a;
  a.params = {1e-5};
  const TensorType x{DType::f32, Shape{4, 3, 5, 6}}, c{DType::f32, Shape{3}};
  const TensorType y{DType::f64, Shape{7, 2}}, yc{DType::f64, Shape{2}};
  // var drawn in [0.5, 2): a variance is never negative.
  return {{{x, c, c, x, c}, a, 0, 1, {{-1, 1}, {-1, 1}, {0.5, 2}}},
          {{y, yc, yc, y}, a, 0, 1, {{-1, 1}, {-1, 1}, {0.5, 2}}}};
}

}  // namespace

BatchNormResult batch_norm(const Tensor& x, const std::optional<Tensor>& weight,
                           const std::optional<Tensor>& bias, double eps) {
  std::vector<Tensor> ops{x};
  if (weight || bias) {
    if (!weight || !bias) fail("batch_norm: weight and bias go together");
    ops.push_back(*weight);
    ops.push_back(*bias);
  }
  auto r = call(Op::batch_norm, ops, {eps});
  return {r[0], r[1], r[2]};
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(batch_norm, "tlaloc.batch_norm", 1, 3, {"epsilon"}, composites::infer,
                        composites::decompose, composites::vjp, composites::make_kernel,
                        composites::examples)
TLALOC_COMPOSITE_RECORD(batch_norm_grad, "tlaloc.batch_norm_grad", 4, 5, {"epsilon"},
                        composites::infer_grad, composites::decompose_grad, nullptr,
                        composites::make_kernel, composites::examples_grad)
