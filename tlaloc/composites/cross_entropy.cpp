// tlaloc.cross_entropy and tlaloc.cross_entropy_grad: softmax cross-entropy per row
// (torch.nn.functional.cross_entropy with reduction="none").
//
// cross_entropy (logits [N, C], labels s32 [N]) -> [N] of the logits' dtype
//   f32 / f64. -log_softmax(logits)[label]: s = x - max (a max of -inf shifts by 0), the label's
//   entry picked by select (never 0·inf); a label outside [0, C) gives -0.
// cross_entropy_grad (logits, labels, d_loss [N]) -> ([N, C], [N])
//   d_loss · (softmax(logits) - one_hot(label)); rows whose label is outside [0, C) are 0 (their
//   loss is constant). Its second result is cross_entropy(logits, labels), bit for bit: a
//   training step's loss then comes out of the gradient's sweep over the logits (the forward
//   node is merged away by passes::simplify when d_loss does not depend on it). Its own VJP is
//   its decomposition's.
// Host kernels, per row of C logits: the max m (NaN if any is NaN; a max of -inf shifts by 0),
// e = exp(x - m), lse = log Σe, loss = -((x[label] - m) - lse); the gradient recomputes e and
// writes d_loss · (e / Σe - one_hot) (the decomposition's exp(s - lse), rounded differently).
// exp is the fused loops' own (ir/scalar.h: exp_f32) for f32; sums use 8 interleaved partials
// added pairwise, so every row's result is fixed by its values alone, whatever the threads.
// An f32 gradient whose only reader is its convert to bf16 (autocast's LM head) is written as
// that bf16 (Kernel::write_converted: the convert's bits, half the bytes), e in scratch rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/composites/sum8.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/ir/scalar.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::composites {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;

// ---- type rule ----------------------------------------------------------------------------

// logits [N, C] f32 / f64, labels s32 [N]; the gradient also d_loss [N] of the logits' dtype.
std::vector<TensorType> infer_impl(std::span<const TensorType> in, bool grad) {
  const TensorType& x = in[0];
  if (x.dtype != DType::f32 && x.dtype != DType::f64)
    fail("needs f32 or f64 logits, got {}", name(x.dtype));
  if (x.shape.rank() != 2) fail("logits must be [N, C], got {}", to_string(x));
  const TensorType l{DType::s32, Shape{x.shape[0]}};
  if (in[1] != l) fail("labels must be {}, got {}", to_string(l), to_string(in[1]));
  const TensorType d{x.dtype, Shape{x.shape[0]}};
  if (grad && in[2] != d) fail("d_loss must be {}, got {}", to_string(d), to_string(in[2]));
  if (grad) return {x, d};
  return {d};
}

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs&) {
  return infer_impl(in, false);
}
std::vector<TensorType> infer_grad(std::span<const TensorType> in, const ir::Attrs&) {
  return infer_impl(in, true);
}

// ---- decomposition ------------------------------------------------------------------------

Tensor is_label(const Tensor& logits, const Tensor& labels) {
  return equal(broadcast_to(expand_dims(labels, 1), logits.shape()),
               trace::iota(logits.shape(), 1, DType::s32));
}

Tensor shifted(const Tensor& x) {
  Tensor m = max(x, {1}, true);
  return x - where(equal(m, full_like(m, -INFINITY)), zeros_like(m), m);
}

Tensor loss(const Tensor& x, const Tensor& labels) {
  Tensor s = shifted(x), ls = s - log(sum(exp(s), {1}, true));
  return -sum(where(is_label(x, labels), ls, zeros_like(ls)), {1});
}

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node&, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  return {loss(Tensor(&b, ops[0]), Tensor(&b, ops[1])).id()};
}

std::vector<ValueId> decompose_grad(ir::Builder& b, const ir::Node&, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  const Tensor x(&b, ops[0]), labels(&b, ops[1]), dl(&b, ops[2]);
  Tensor s = shifted(x), p = exp(s - log(sum(exp(s), {1}, true)));
  Tensor hot = where(is_label(x, labels), ones_like(p), zeros_like(p));
  Tensor in =
      broadcast_to(expand_dims((labels > -1.0) & (labels < double(x.dim(1))), 1), x.shape());
  Tensor dx = where(in, broadcast_to(expand_dims(dl, 1), x.shape()) * (p - hot), zeros_like(p));
  return {dx.id(), loss(x, labels).id()};
}

// ---- VJP: the logits' cotangent is cross_entropy_grad's first result; labels get none ------

std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  std::vector<ValueId> out(c.n.operands.size(), -1);
  if (c.need[0])
    out[0] = c.b.composite(Op::cross_entropy_grad, {c.operand(0), c.operand(1), c.ct})[0];
  return out;
}

// ---- host kernels ---------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct CrossEntropyKernel : Kernel {
  int32_t x = -1, labels = -1, dl = -1, res = -1, loss = -1;  // loss: the gradient's second
  int64_t N = 0, C = 0;
  bool parallel = false;
  // write_converted: the f32 gradient's bf16 convert is written to res instead (the two
  // GEMMs of an autocast LM head read it), e in per-thread scratch rows.
  bool grad_bf16 = false;
  int threads = 1;
};

// NaN-propagating max: a NaN operand wins.
template <class F>
__attribute__((always_inline)) inline F max_nan(F a, F b) {
  return (a > b || a != a) ? a : b;
}

// A row's shift (its max, 0 when that is -inf); e[i] = exp(x[i] - shift); returns Σ e (sum8):
// the max, e and its sum each in a loop of their own (e alone vectorizes at full width).
template <class F>
__attribute__((always_inline)) inline F row_exp(const F* x, int64_t C, F& shift, F* e) {
  F m[8];
  for (int k = 0; k < 8; ++k) m[k] = -std::numeric_limits<F>::infinity();
  int64_t i = 0;
  for (; i + 8 <= C; i += 8)
    for (int k = 0; k < 8; ++k) m[k] = max_nan(m[k], x[i + k]);
  for (; i < C; ++i) m[i % 8] = max_nan(m[i % 8], x[i]);
  F mx = m[0];
  for (int k = 1; k < 8; ++k) mx = max_nan(mx, m[k]);
  shift = mx == -std::numeric_limits<F>::infinity() ? F(0) : mx;
  for (int64_t j = 0; j < C; ++j) e[j] = ir::scalar::fexp(x[j] - shift);
  return sum8<F>(C, [&](int64_t j) { return e[j]; });
}

// Rows [r0, r1). The loss needs e only for its sum (written to `buf`, C values); the gradient
// writes e to its output row and scales it there: d = d_loss · (e / Σe - one_hot), and its loss
// from the same sum.
template <class F>
TLALOC_CLONES void rows(const CrossEntropyKernel& k, const Frame& fr, int64_t r0, int64_t r1,
                        F* buf) {
  const int64_t C = k.C;
  const auto* L = static_cast<const int32_t*>(fr.ptr[k.labels]);
  for (int64_t r = r0; r < r1; ++r) {
    const F* x = static_cast<const F*>(fr.ptr[k.x]) + r * C;
    const int64_t label = L[r];
    const bool in = label >= 0 && label < C;
    F shift;
    if (k.dl < 0) {
      const F lse = std::log(row_exp(x, C, shift, buf));
      static_cast<F*>(fr.ptr[k.res])[r] = in ? -((x[label] - shift) - lse) : -F(0);
      continue;
    }
    F* loss = static_cast<F*>(fr.ptr[k.loss]) + r;
    // grad_bf16: the row in scratch, then rounded into the bf16 result.
    const bool narrow = std::is_same_v<F, float> && k.grad_bf16;
    F* d = narrow ? buf : static_cast<F*>(fr.ptr[k.res]) + r * C;
    if (!in) {
      std::fill(d, d + C, F(0));
      *loss = -F(0);
    } else {
      const F sum = row_exp(x, C, shift, d);
      *loss = -((x[label] - shift) - std::log(sum));
      const F dl = static_cast<const F*>(fr.ptr[k.dl])[r];
      const F el = d[label];
      for (int64_t i = 0; i < C; ++i) d[i] = dl * (d[i] / sum);
      d[label] = dl * (el / sum - F(1));
    }
    if constexpr (std::is_same_v<F, float>)
      if (narrow)
        runtime::host::round_to_bf16(d, static_cast<uint16_t*>(fr.ptr[k.res]) + r * C, false, C);
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<CrossEntropyKernel>(kk);
  const int nt =
      k.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, k.N)) : 1;
  runtime::host::parallel(nt, [&](int p, int P) {
    F* buf = reinterpret_cast<F*>(fr.scratch) + runtime::host::team_thread() * k.C;
    rows<F>(k, fr, k.N * p / P, k.N * (p + 1) / P, buf);
  });
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<CrossEntropyKernel>();
  k->x = n.operands[0];
  k->labels = n.operands[1];
  k->res = id;
  if (n.op == Op::cross_entropy_grad) {
    k->dl = n.operands[2];
    k->res = id + 1;
    k->loss = id + 2;
  }
  const Shape& xs = f.type(k->x).shape;
  k->N = xs[0];
  k->C = xs[1];
  k->parallel = num_threads != 1 && k->N * k->C >= runtime::host::kParallelElements;
  const int64_t elem = f.type(k->x).dtype == DType::f64 ? 8 : 4;
  k->threads = std::max(num_threads, 1);
  if (k->dl < 0) k->scratch_bytes = k->threads * k->C * elem;  // one row each
  if (k->dl >= 0 && elem == 4)
    k->write_converted = [](Kernel& kk, int32_t from, int32_t to, DType dt) {
      auto& c = static_cast<CrossEntropyKernel&>(kk);
      if (dt != DType::bf16 || from != c.res || c.grad_bf16) return false;
      c.grad_bf16 = true;
      c.res = to;
      c.writes = {to, c.loss};
      c.scratch_bytes = c.threads * c.C * 4;
      c.label += " -> bf16";
      return true;
    };
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = ir::results_of(f, id);
  k->run = f.type(k->x).dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

// ---- examples for the record-walking tests ------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  const TensorType x{DType::f32, Shape{4, 7}}, l{DType::s32, Shape{4}};
  const TensorType y{DType::f64, Shape{3, 5}}, m{DType::s32, Shape{3}};
  return {{{x, l}, {}, -1, 8}, {{y, m}, {}, 0, 5}};
}

std::vector<ir::CompositeExample> examples_grad() {
  const TensorType x{DType::f32, Shape{4, 7}}, l{DType::s32, Shape{4}}, d{DType::f32, Shape{4}};
  return {{{x, l, d}, {}, -1, 8}};
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  return call(Op::cross_entropy, {logits, labels})[0];
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(cross_entropy, "tlaloc.cross_entropy", 2, 2, {}, composites::infer,
                        composites::decompose, composites::vjp, composites::make_kernel,
                        composites::examples)
TLALOC_COMPOSITE_RECORD(cross_entropy_grad, "tlaloc.cross_entropy_grad", 3, 3, {},
                        composites::infer_grad, composites::decompose_grad, nullptr,
                        composites::make_kernel, composites::examples_grad,
                        ::tlaloc::ir::Op::cross_entropy, 1)
