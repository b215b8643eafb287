// tlaloc.rope: rotary position embeddings (Su et al. 2021, "RoFormer"; HF's apply_rotary_pos_emb).
//
// rope (x [..., S, H, D], cos [S, D/2], sin [S, D/2]) {interleaved} -> x's type
//   f32 / f64, all three of one dtype, D even. Each pair (a, b) of features of head h at
//   position s becomes (a·cos[s, i] − b·sin[s, i], b·cos[s, i] + a·sin[s, i]); the pairs are
//   (i, i + D/2) (rotate-half, HF's layout; interleaved = 0) or (2i, 2i + 1) (Meta's;
//   interleaved = 1). The decomposition: slices of x, elementwise ops, a concatenate.
// VJP: a rotation's transpose is the rotation by the opposite angle, so x's cotangent is
//   rope(ct, cos, −sin), one more rope node; cos / sin (constants in a model) get theirs from
//   the decomposition when asked.
// Host kernel: one pass, a row of D features per (leading index, s, h), each output one multiply,
//   one multiply and one add / subtract in the decomposition's order (no FMA): bitwise the
//   plain ops' result, whatever the threads, without the plain ops' strided half-row views,
//   concatenate and the pads of the slices' gradients.
#include "tlaloc/autodiff/rules.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::composites {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;
enum Param { kInterleaved };

// ---- type rule ------------------------------------------------------------------------------

std::vector<TensorType> infer(std::span<const TensorType> in, const ir::Attrs& a) {
  const TensorType& x = in[0];
  if (x.dtype != DType::f32 && x.dtype != DType::f64)
    fail("needs f32 or f64 x, got {}", to_string(x));
  const int64_t r = x.shape.rank();
  if (r < 3 || x.shape[r - 1] % 2 != 0)
    fail("x must be [..., seq, heads, head_dim] with an even head_dim, got {}", to_string(x));
  const TensorType t{x.dtype, Shape{x.shape[r - 3], x.shape[r - 1] / 2}};
  if (in[1] != t) fail("cos must be {}, got {}", to_string(t), to_string(in[1]));
  if (in[2] != t) fail("sin must be {}, got {}", to_string(t), to_string(in[2]));
  const double il = a.params[kInterleaved];
  if (il != 0 && il != 1) fail("interleaved must be 0 or 1, got {}", il);
  return {x};
}

// ---- decomposition --------------------------------------------------------------------------

Tensor rope_decomposed(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  const int64_t r = x.rank(), S = x.dim(-3), D = x.dim(-1), h = D / 2;
  // The pairs (a, b) as two tensors, cos / sin broadcast over the heads (and the pair axis).
  Tensor a, b, c, s;
  std::vector<int64_t> dims = x.shape().dims;
  if (!interleaved) {
    a = slice(x, r - 1, 0, h);
    b = slice(x, r - 1, h, D);
    c = reshape(cos, {S, 1, h});
    s = reshape(sin, {S, 1, h});
  } else {
    std::vector<int64_t> pairs = dims;
    pairs.back() = h;
    pairs.push_back(2);
    Tensor xp = reshape(x, pairs);
    a = slice(xp, r, 0, 1);
    b = slice(xp, r, 1, 2);
    c = reshape(cos, {S, 1, h, 1});
    s = reshape(sin, {S, 1, h, 1});
  }
  Tensor y = trace::concat({a * c - b * s, b * c + a * s}, interleaved ? r : r - 1);
  return interleaved ? reshape(y, dims) : y;
}

std::vector<ValueId> decompose(ir::Builder& b, const ir::Node& n, std::span<const ValueId> ops) {
  trace::BuilderScope scope(b);
  return {rope_decomposed(Tensor(&b, ops[0]), Tensor(&b, ops[1]), Tensor(&b, ops[2]),
                          n.attrs.params[kInterleaved] != 0)
              .id()};
}

// ---- VJP ------------------------------------------------------------------------------------

std::vector<ValueId> vjp(const autodiff::detail::RuleCtx& c) {
  std::vector<ValueId> out(3, -1);
  if (c.need[1] || c.need[2]) out = autodiff::detail::vjp_by_decomposition(c);
  if (c.need[0]) {
    trace::BuilderScope scope(c.b);
    out[0] = c.b.composite(Op::rope, {c.ct, c.operand(1), (-c.x(2)).id()}, c.n.attrs.params)[0];
  }
  return out;
}

// ---- host kernel ----------------------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct RopeKernel : Kernel {
  int32_t x = -1, cos = -1, sin = -1, y = -1;
  int64_t rows = 0, S = 0, H = 0, D = 0;
  bool interleaved = false, parallel = false;
};

template <class F>
TLALOC_CLONES void rows(const RopeKernel& k, const Frame& fr, int64_t r0, int64_t r1) {
  const int64_t h = k.D / 2;
  const F* X = static_cast<const F*>(fr.ptr[k.x]);
  const F* C = static_cast<const F*>(fr.ptr[k.cos]);
  const F* Sn = static_cast<const F*>(fr.ptr[k.sin]);
  F* Y = static_cast<F*>(fr.ptr[k.y]);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t s = r / k.H % k.S;
    const F* x = X + r * k.D;
    const F* c = C + s * h;
    const F* sn = Sn + s * h;
    F* y = Y + r * k.D;
    if (k.interleaved) {
      for (int64_t i = 0; i < h; ++i) {
        const F a = x[2 * i], b = x[2 * i + 1];
        y[2 * i] = a * c[i] - b * sn[i];
        y[2 * i + 1] = b * c[i] + a * sn[i];
      }
    } else {
      for (int64_t i = 0; i < h; ++i) {
        const F a = x[i], b = x[i + h];
        y[i] = a * c[i] - b * sn[i];
        y[i + h] = b * c[i] + a * sn[i];
      }
    }
  }
}

template <class F>
void run(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<RopeKernel>(kk);
  const int nt =
      k.parallel
          ? int(std::min<int64_t>(int64_t(fr.num_threads) * runtime::host::kPartsPerThread, k.rows))
          : 1;
  runtime::host::parallel(
      nt, [&](int p, int P) { rows<F>(k, fr, k.rows * p / P, k.rows * (p + 1) / P); });
}

std::unique_ptr<Kernel> make_kernel(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  auto k = std::make_unique<RopeKernel>();
  const Shape& xs = f.type(n.operands[0]).shape;
  const int64_t r = xs.rank();
  k->x = n.operands[0];
  k->cos = n.operands[1];
  k->sin = n.operands[2];
  k->y = id;
  k->S = xs[r - 3];
  k->H = xs[r - 2];
  k->D = xs[r - 1];
  k->rows = xs.numel() / k->D;
  k->interleaved = n.attrs.params[kInterleaved] != 0;
  k->parallel = num_threads != 1 && xs.numel() >= runtime::host::kParallelElements;
  k->reads.assign(n.operands.begin(), n.operands.end());
  k->writes = {id};
  k->run = n.type.dtype == DType::f64 ? run<double> : run<float>;
  return k;
}

// ---- examples for the record-walking tests --------------------------------------------------

std::vector<ir::CompositeExample> examples() {
  ir::Attrs half, inter;
  half.params = {0};
  inter.params = {1};
  const TensorType x{DType::f32, Shape{2, 5, 3, 8}}, t{DType::f32, Shape{5, 4}};
  const TensorType y{DType::f64, Shape{3, 2, 6}}, u{DType::f64, Shape{3, 3}};
  const TensorType z{DType::f32, Shape{2, 1, 4, 2, 4}}, v{DType::f32, Shape{4, 2}};
  return {{{x, t, t}, half}, {{x, t, t}, inter}, {{y, u, u}, inter}, {{z, v, v}, half}};
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64)
    return rope_decomposed(x, cos, sin, interleaved);
  return call(Op::rope, {x, cos, sin}, {double(interleaved)})[0];
}

}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(rope, "tlaloc.rope", 3, 3, {"interleaved"}, composites::infer,
                        composites::decompose, composites::vjp, composites::make_kernel,
                        composites::examples)
