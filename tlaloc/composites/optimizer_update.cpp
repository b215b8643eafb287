// tlaloc.adam_update and tlaloc.sgd_update: one parameter's optimizer update inside the train
// step (optim/update.cpp emits one per parameter), torch 1.13's single-tensor Adam / AdamW / SGD
// (optim/optimizer.h has the formulas).
//
// adam_update (p, g, m, v, [v_max], step s32[], lr f64[], scale f64[], skip i1[])
//     {beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize} -> (p', m', v', [v_max'])
//   p, g, m, v, v_max: the master dtype (f32 or f64), one shape. The gradient the formulas see
//   is g·scale (scale unscales and clips); step counts the updates applied before this one.
//   Bias corrections in f64 from t = step + 1 enter as α = lr·√(1−β2^t)/(1−β1^t) and
//   ε̂ = eps·√(1−β2^t) (Kingma & Ba 2015, end of section 2): p' = p − α·m' / (√v' + ε̂).
//   Without L2 decay, m' and v' take g with the scale folded into their coefficients:
//   m' = β1·m + g·(s(1−β1)), v' = β2·v + (g·(s√(1−β2)))², s = ±scale. With L2 (Adam's
//   weight_decay): g_l = g·s + wd·p, m' = β1·m + (1−β1)·g_l, v' = β2·v + (1−β2)·g_l². AdamW
//   (decoupled) scales p by 1 − lr·wd first. amsgrad: v_max' = max(v_max, v') replaces v' in
//   the step. skip (a non-finite gradient somewhere): every result equals its old value.
// sgd_update (p, g, [momentum_buffer], step, lr, scale, skip)
//     {momentum, dampening, weight_decay, nesterov, maximize} -> (p', [momentum_buffer'])
//   d = g·(±scale) + wd·p; with momentum: b' = d on the first step (step == 0), else
//   μ·b + (1−τ)·d; d = d + μ·b' (nesterov) or b'; p' = p − lr·d.
// Both decompose into the ops the update was before it became an op (each op rounded to the
// master dtype, scalars in f64); the host kernel of adam_update is one pass over the elements
// doing the same ops in the same order (AVX2 for f32 without amsgrad or L2 decay), so its bits
// are the decomposition's. sgd_update runs its decomposition (fused by the host lane's
// elementwise groups). Neither is differentiated (their results are the step's outputs).
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <span>
#include <vector>

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
enum AdamParam { kBeta1, kBeta2, kEps, kWeightDecay, kDecoupled, kAmsgrad, kMaximize };
enum SgdParam { kMomentum, kDampening, kSgdWeightDecay, kNesterov, kSgdMaximize };

// ---- type rules -----------------------------------------------------------------------------

// The tensors (p, g, state...) then step, lr, scale, skip.
std::vector<TensorType> check(std::span<const TensorType> in, size_t tensors, const char* what) {
  if (in.size() != tensors + 4) fail("expects {} operands, got {}", tensors + 4, in.size());
  const TensorType& p = in[0];
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    fail("parameter must be f32 or f64 (a master copy), got {}", to_string(p));
  for (size_t i = 1; i < tensors; ++i)
    if (in[i] != p)
      fail("{} operand {} is {}, the parameter {}", what, i, to_string(in[i]), to_string(p));
  const TensorType step{DType::s32, {}}, f64{DType::f64, {}}, skip{DType::i1, {}};
  if (in[tensors] != step) fail("step must be s32[], got {}", to_string(in[tensors]));
  if (in[tensors + 1] != f64 || in[tensors + 2] != f64)
    fail("lr and scale must be f64[], got {} and {}", to_string(in[tensors + 1]),
         to_string(in[tensors + 2]));
  if (in[tensors + 3] != skip) fail("skip must be i1[], got {}", to_string(in[tensors + 3]));
  std::vector<TensorType> out(tensors - 1, p);  // p' and the state
  return out;
}

// Attribute `name` (params[i]) a finite number >= 0, or a flag (0 or 1).
void non_negative(const ir::Attrs& a, size_t i, const char* name) {
  if (!(a.params[i] >= 0) || !std::isfinite(a.params[i]))
    fail("{} {} must be finite and >= 0", name, a.params[i]);
}
void flag(const ir::Attrs& a, size_t i, const char* name) {
  if (a.params[i] != 0 && a.params[i] != 1) fail("{} {} must be 0 or 1", name, a.params[i]);
}

std::vector<TensorType> infer_adam(std::span<const TensorType> in, const ir::Attrs& a) {
  const double b1 = a.params[kBeta1], b2 = a.params[kBeta2];
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    fail("betas ({}, {}) must be in [0, 1)", b1, b2);
  non_negative(a, kEps, "eps");
  non_negative(a, kWeightDecay, "weight_decay");
  flag(a, kDecoupled, "decoupled");
  flag(a, kAmsgrad, "amsgrad");
  flag(a, kMaximize, "maximize");
  return check(in, a.params[kAmsgrad] != 0 ? 5 : 4, "adam_update");
}

std::vector<TensorType> infer_sgd(std::span<const TensorType> in, const ir::Attrs& a) {
  non_negative(a, kMomentum, "momentum");
  if (!std::isfinite(a.params[kDampening]))
    fail("dampening {} must be finite", a.params[kDampening]);
  non_negative(a, kSgdWeightDecay, "weight_decay");
  flag(a, kNesterov, "nesterov");
  flag(a, kSgdMaximize, "maximize");
  if (a.params[kNesterov] != 0 && (a.params[kMomentum] == 0 || a.params[kDampening] != 0))
    fail("nesterov needs momentum > 0 and dampening 0 (momentum {}, dampening {})",
         a.params[kMomentum], a.params[kDampening]);
  return check(in, a.params[kMomentum] != 0 ? 3 : 2, "sgd_update");
}

// ---- decompositions -------------------------------------------------------------------------

Tensor select_scalar(const Tensor& pred, const Tensor& on_true, const Tensor& on_false) {
  ir::Builder& b = on_true.builder();
  return {&b, b.select(pred.id(), on_true.id(), on_false.id())};
}

std::vector<ValueId> decompose_adam(ir::Builder& bl, const ir::Node& n,
                                    std::span<const ValueId> ops) {
  trace::BuilderScope scope(bl);
  const std::vector<double>& a = n.attrs.params;
  const bool ams = a[kAmsgrad] != 0, decoupled = a[kDecoupled] != 0;
  const size_t k = ams ? 5 : 4;
  auto T = [&](size_t i) { return Tensor(&bl, ops[i]); };
  Tensor p = T(0), g = T(1), m0 = T(2), v0 = T(3);
  const Tensor step = T(k), lr = T(k + 1), scale = T(k + 2), skip = T(k + 3);
  const DType dt = p.dtype();
  const double b1 = a[kBeta1], b2 = a[kBeta2], wd = a[kWeightDecay];
  const Tensor t64 = astype(step + 1.0, DType::f64);
  Tensor bc1 = 1.0 - pow(trace::scalar(b1, DType::f64), t64);
  Tensor bc2_sqrt = sqrt(1.0 - pow(trace::scalar(b2, DType::f64), t64));
  Tensor alpha = astype(lr * bc2_sqrt / bc1, dt);
  Tensor eps_hat = astype(a[kEps] * bc2_sqrt, dt);
  Tensor s = a[kMaximize] != 0 ? -scale : scale;
  Tensor m, v;
  if (wd != 0 && !decoupled) {  // L2: the gradient itself is needed
    Tensor gl = g * astype(s, dt) + p * wd;
    m = m0 * b1 + gl * (1 - b1);
    v = v0 * b2 + gl * gl * (1 - b2);
  } else {
    m = m0 * b1 + g * astype(s * (1 - b1), dt);
    Tensor gc = g * astype(s * std::sqrt(1 - b2), dt);  // scaled before squaring
    v = v0 * b2 + gc * gc;
  }
  if (wd != 0 && decoupled) p = p * astype(1.0 - lr * wd, dt);
  std::vector<Tensor> state{m, v};
  Tensor vs = v;
  if (ams) state.push_back(vs = maximum(T(4), v));
  p = p - alpha * (m / (sqrt(vs) + eps_hat));
  std::vector<ValueId> out{select_scalar(skip, T(0), p).id()};
  for (size_t i = 0; i < state.size(); ++i)
    out.push_back(select_scalar(skip, T(2 + i), state[i]).id());
  return out;
}

std::vector<ValueId> decompose_sgd(ir::Builder& bl, const ir::Node& n,
                                   std::span<const ValueId> ops) {
  trace::BuilderScope scope(bl);
  const std::vector<double>& a = n.attrs.params;
  const double mu = a[kMomentum], wd = a[kSgdWeightDecay];
  const size_t k = mu != 0 ? 3 : 2;
  auto T = [&](size_t i) { return Tensor(&bl, ops[i]); };
  const Tensor p = T(0), g = T(1), step = T(k), lr = T(k + 1), scale = T(k + 2), skip = T(k + 3);
  const DType dt = p.dtype();
  Tensor d = g * astype(a[kSgdMaximize] != 0 ? -scale : scale, dt);
  if (wd != 0) d = d + p * wd;
  std::vector<ValueId> out(1);
  if (mu != 0) {
    Tensor damped = a[kDampening] == 0 ? d : d * (1 - a[kDampening]);
    Tensor first = equal(step, trace::scalar(0, DType::s32));
    Tensor buf = select_scalar(first, d, T(2) * mu + damped);
    out.push_back(select_scalar(skip, T(2), buf).id());
    d = a[kNesterov] != 0 ? d + buf * mu : buf;
  }
  out[0] = select_scalar(skip, p, p - d * astype(lr, dt)).id();
  return out;
}

// ---- host kernel of adam_update -------------------------------------------------------------

using runtime::host::Frame;
using runtime::host::Kernel;

struct AdamKernel : Kernel {
  int32_t p = -1, g = -1, m = -1, v = -1, vmax = -1, step = -1, lr = -1, scale = -1, skip = -1;
  int32_t rp = -1, rm = -1, rv = -1, rvmax = -1;
  int64_t n = 0;
  double b1 = 0, b2 = 0, eps = 0, wd = 0;
  bool decoupled = false, amsgrad = false, maximize = false, f64 = false, parallel = false;
};

// The per-run coefficients, computed as the decomposition's scalar ops compute them (f64, then
// rounded to F once each).
template <class F>
struct Coef {
  F b1, b2, c1 = 0, c2 = 0, s = 0, wd = 0, omb1 = 0, omb2 = 0, alpha, eps, decay = 1;
  bool l2, decay_on;
  Coef(const AdamKernel& k, const Frame& fr) {
    const int32_t step = *static_cast<const int32_t*>(fr.ptr[k.step]);
    const double lr = *static_cast<const double*>(fr.ptr[k.lr]);
    const double scale = *static_cast<const double*>(fr.ptr[k.scale]);
    const double t = double(int32_t(uint32_t(step) + 1u));
    const double bc1 = 1.0 - ir::scalar::Pow::f<double>(k.b1, t);
    const double bc2_sqrt = std::sqrt(1.0 - ir::scalar::Pow::f<double>(k.b2, t));
    b1 = F(k.b1);
    b2 = F(k.b2);
    alpha = F(lr * bc2_sqrt / bc1);
    eps = F(k.eps * bc2_sqrt);
    const double sd = k.maximize ? -scale : scale;
    l2 = k.wd != 0 && !k.decoupled;
    decay_on = k.wd != 0 && k.decoupled;
    if (l2) {
      s = F(sd);
      wd = F(k.wd);
      omb1 = F(1 - k.b1);
      omb2 = F(1 - k.b2);
    } else {
      c1 = F(sd * (1 - k.b1));
      c2 = F(sd * std::sqrt(1 - k.b2));
    }
    if (decay_on) decay = F(1.0 - lr * k.wd);
  }
};

// Elements [i0, i1), each op one IEEE operation rounded to F in the decomposition's order (no
// FMA). Every input of element i is read before its results are written: results may be the
// inputs' storage (donated state).
template <class F>
TLALOC_CLONES void span_scalar(const AdamKernel& k, const Frame& fr, const Coef<F>& c, int64_t i0,
                               int64_t i1) {
  auto in = [&](int32_t v) { return static_cast<const F*>(fr.ptr[v]); };
  auto out = [&](int32_t v) { return static_cast<F*>(fr.ptr[v]); };
  const F *P = in(k.p), *G = in(k.g), *M = in(k.m), *V = in(k.v);
  const F* VM = k.amsgrad ? in(k.vmax) : nullptr;
  F *PO = out(k.rp), *MO = out(k.rm), *VO = out(k.rv);
  F* VMO = k.amsgrad ? out(k.rvmax) : nullptr;
  for (int64_t i = i0; i < i1; ++i) {
    const F gi = G[i], mi = M[i], vi = V[i], pi = P[i];
    F mn, vn;
    if (c.l2) {
      const F gl = gi * c.s + pi * c.wd;
      mn = mi * c.b1 + gl * c.omb1;
      vn = vi * c.b2 + gl * gl * c.omb2;
    } else {
      mn = mi * c.b1 + gi * c.c1;
      const F gc = gi * c.c2;
      vn = vi * c.b2 + gc * gc;
    }
    const F p1 = c.decay_on ? pi * c.decay : pi;
    F vs = vn;
    if (VM) vs = ir::scalar::Max::f<F>(VM[i], vn);
    PO[i] = p1 - c.alpha * (mn / (std::sqrt(vs) + c.eps));
    MO[i] = mn;
    VO[i] = vn;
    if (VMO) VMO[i] = vs;
  }
}

// f32 without amsgrad or L2 decay: 8 elements per AVX2 vector, the same ops as span_scalar.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) int64_t span_avx2(const AdamKernel& k, const Frame& fr,
                                                  const Coef<float>& c, int64_t i0, int64_t i1) {
  auto in = [&](int32_t v) { return static_cast<const float*>(fr.ptr[v]); };
  auto out = [&](int32_t v) { return static_cast<float*>(fr.ptr[v]); };
  const float *P = in(k.p), *G = in(k.g), *M = in(k.m), *V = in(k.v);
  float *PO = out(k.rp), *MO = out(k.rm), *VO = out(k.rv);
  const __m256 b1 = _mm256_set1_ps(c.b1), c1 = _mm256_set1_ps(c.c1), b2 = _mm256_set1_ps(c.b2),
               c2 = _mm256_set1_ps(c.c2), eps = _mm256_set1_ps(c.eps),
               alpha = _mm256_set1_ps(c.alpha), decay = _mm256_set1_ps(c.decay);
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    const __m256 g = _mm256_loadu_ps(G + i), m = _mm256_loadu_ps(M + i), v = _mm256_loadu_ps(V + i),
                 p = _mm256_loadu_ps(P + i);
    const __m256 mn = _mm256_add_ps(_mm256_mul_ps(m, b1), _mm256_mul_ps(g, c1));
    const __m256 gc = _mm256_mul_ps(g, c2);
    const __m256 vn = _mm256_add_ps(_mm256_mul_ps(v, b2), _mm256_mul_ps(gc, gc));
    const __m256 q = _mm256_div_ps(mn, _mm256_add_ps(_mm256_sqrt_ps(vn), eps));
    const __m256 p1 = c.decay_on ? _mm256_mul_ps(p, decay) : p;
    _mm256_storeu_ps(PO + i, _mm256_sub_ps(p1, _mm256_mul_ps(alpha, q)));
    _mm256_storeu_ps(MO + i, mn);
    _mm256_storeu_ps(VO + i, vn);
  }
  return i;
}
#endif

bool avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

// A skipped update: each result (to[k]) becomes its old value (from[k]). Results may be the
// storage of other inputs (donated state, in any pairing), so when a result overwrites another
// pair's source, every source is copied aside first.
void keep(const Frame& fr, std::span<const int32_t> from, std::span<const int32_t> to,
          int64_t bytes) {
  bool crossed = false;
  for (size_t k = 0; k < to.size(); ++k)
    for (size_t j = 0; j < from.size(); ++j) crossed |= j != k && fr.ptr[to[k]] == fr.ptr[from[j]];
  std::vector<std::vector<char>> saved;
  for (size_t k = 0; k < from.size(); ++k) {
    const char* src = static_cast<const char*>(fr.ptr[from[k]]);
    if (crossed) saved.emplace_back(src, src + bytes);
  }
  for (size_t k = 0; k < to.size(); ++k) {
    const void* src = crossed ? saved[k].data() : fr.ptr[from[k]];
    if (src != fr.ptr[to[k]]) std::memcpy(fr.ptr[to[k]], src, size_t(bytes));
  }
}

template <class F>
void run_adam(const Kernel& kk, const Frame& fr) {
  const auto& k = runtime::host::as<AdamKernel>(kk);
  if (*static_cast<const uint8_t*>(fr.ptr[k.skip])) {
    const int64_t bytes = k.n * int64_t(sizeof(F));
    const int32_t from[] = {k.p, k.m, k.v, k.vmax}, to[] = {k.rp, k.rm, k.rv, k.rvmax};
    const size_t n = k.amsgrad ? 4 : 3;
    keep(fr, std::span(from, n), std::span(to, n), bytes);
    return;
  }
  const Coef<F> c(k, fr);
  const bool vec = std::is_same_v<F, float> && !k.amsgrad && !c.l2 && avx2();
  // Parts of whole 64-element runs, so every vector loop but the last runs full.
  const int64_t units = (k.n + 63) / 64;
  const int nt =
      k.parallel ? int(std::min<int64_t>(fr.num_threads * runtime::host::kPartsPerThread, units))
                 : 1;
  runtime::host::parallel(nt, [&](int part, int parts) {
    const int64_t i0 = std::min(k.n, units * part / parts * 64);
    const int64_t i1 = std::min(k.n, units * (part + 1) / parts * 64);
    int64_t i = i0;
#if defined(__x86_64__) && defined(__GNUC__)
    if constexpr (std::is_same_v<F, float>)
      if (vec) i = span_avx2(k, fr, c, i0, i1);
#endif
    span_scalar<F>(k, fr, c, i, i1);
  });
}

std::unique_ptr<Kernel> make_adam(const ir::Function& f, ValueId id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  const std::vector<double>& a = n.attrs.params;
  auto k = std::make_unique<AdamKernel>();
  k->amsgrad = a[kAmsgrad] != 0;
  const size_t t = k->amsgrad ? 5 : 4;
  k->p = n.operands[0];
  k->g = n.operands[1];
  k->m = n.operands[2];
  k->v = n.operands[3];
  if (k->amsgrad) k->vmax = n.operands[4];
  k->step = n.operands[t];
  k->lr = n.operands[t + 1];
  k->scale = n.operands[t + 2];
  k->skip = n.operands[t + 3];
  k->rp = id + 1;
  k->rm = id + 2;
  k->rv = id + 3;
  if (k->amsgrad) k->rvmax = id + 4;
  k->b1 = a[kBeta1];
  k->b2 = a[kBeta2];
  k->eps = a[kEps];
  k->wd = a[kWeightDecay];
  k->decoupled = a[kDecoupled] != 0;
  k->maximize = a[kMaximize] != 0;
  k->f64 = n.type.dtype == DType::f64;
  k->n = n.type.shape.numel();
  k->parallel = num_threads != 1 && k->n >= runtime::host::kParallelElements;
  k->reads.assign(n.operands.begin(), n.operands.end());
  // p, m, v (and v_max) are read element by element before that element's results are
  // written: a donated one may be overwritten in place.
  k->in_place = {k->p, k->m, k->v};
  if (k->amsgrad) k->in_place.push_back(k->vmax);
  k->writes = ir::results_of(f, id);
  k->run = k->f64 ? run_adam<double> : run_adam<float>;
  return k;
}

// ---- examples for the record-walking tests --------------------------------------------------

std::vector<ir::CompositeExample> adam_examples() {
  const TensorType p{DType::f32, Shape{3, 37}}, q{DType::f64, Shape{5}};
  const TensorType step{DType::s32, {}}, f64{DType::f64, {}}, skip{DType::i1, {}};
  ir::Attrs w, l2;
  w.params = {0.9, 0.999, 1e-8, 0.01, 1, 0, 0};  // AdamW
  l2.params = {0.8, 0.99, 1e-6, 0.1, 0, 1, 1};   // Adam, L2, amsgrad, maximize
  // v and v_max (second moments) are >= 0; lr and scale positive.
  const std::array<double, 2> any{-1, 1}, pos{0.25, 1}, lr{1e-3, 2e-3};
  return {{{p, p, p, p, step, f64, f64, skip}, w, 0, 3, {any, any, any, pos, lr, pos}},
          {{q, q, q, q, q, step, f64, f64, skip}, l2, 0, 3, {any, any, any, pos, pos, lr, pos}}};
}

std::vector<ir::CompositeExample> sgd_examples() {
  const TensorType p{DType::f32, Shape{4, 5}}, q{DType::f64, Shape{3}};
  const TensorType step{DType::s32, {}}, f64{DType::f64, {}}, skip{DType::i1, {}};
  ir::Attrs plain, nesterov;
  plain.params = {0, 0, 0, 0, 0};
  nesterov.params = {0.9, 0, 1e-2, 1, 1};
  const std::array<double, 2> any{-1, 1}, pos{0.25, 1};
  return {{{p, p, step, f64, f64, skip}, plain, 0, 3, {any, any, pos, pos}},
          {{q, q, q, step, f64, f64, skip}, nesterov, 0, 3, {any, any, any, pos, pos}}};
}

}  // namespace
}  // namespace tlaloc::composites

TLALOC_COMPOSITE_RECORD(adam_update, "tlaloc.adam_update", 8, 9,
                        {"beta1", "beta2", "eps", "weight_decay", "decoupled", "amsgrad",
                         "maximize"},
                        composites::infer_adam, composites::decompose_adam, nullptr,
                        composites::make_adam, composites::adam_examples)
TLALOC_COMPOSITE_RECORD(sgd_update, "tlaloc.sgd_update", 6, 7,
                        {"momentum", "dampening", "weight_decay", "nesterov", "maximize"},
                        composites::infer_sgd, composites::decompose_sgd, nullptr, nullptr,
                        composites::sgd_examples)
