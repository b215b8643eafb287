// reduce_window and select_and_scatter (StableHLO, narrowed as ir/builder.h says: one operand,
// implied init, select a compare, scatter an add). The leading dimensions whose window is
// trivial (size 1, stride 1, no padding or dilation) are "planes", computed independently:
// parts are fixed ranges of planes, and each plane is computed in the same order whatever the
// thread count, so results are bitwise the same at any thread count. Within a plane, windows
// over at most two (innermost) dimensions without base dilation take the 2-D path (valid
// window ranges precomputed per output row / column: no per-element bounds checks); anything
// else takes the general path (any rank, base and window dilations). Window elements are
// visited in row-major order, padding and dilation holes skipped (they hold the init, which
// changes no result). Sums accumulate in the compute type (bf16 / f16 in f32) and round once;
// max / min keep the first of equal values and propagate NaN.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tlaloc/runtime/host/instr.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

#if TLALOC_HOST_AVX2  // (GCC on x86-64: the vector builds instr.h dispatches to)
#include <immintrin.h>
#endif

namespace tlaloc::runtime::host {
namespace {

#if TLALOC_HOST_AVX2

// One row pair of max pooling's 2x2 gradient (scatter_pool2x2's picks, the same bits) in
// AVX-512, 8 windows at a time under masks (lanes 8-15 unused): x0 / x1 the two operand rows
// [2 OW], s the source row [OW], y0 / y1 the result rows. A window a b / c d takes b, c, d in
// turn unless the best so far is >= it (NGE_UQ: after a NaN the next is taken); the last taken
// gets s, the others +0.
__attribute__((target("avx512f"))) void scatter_pool2x2_row_avx512(const float* x0, const float* x1,
                                                                   const float* s, float* y0,
                                                                   float* y1, int64_t OW) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i weave = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __mmask16 all = 0xffff;
  for (int64_t o = 0; o < OW; o += 8) {
    const int64_t n = std::min<int64_t>(8, OW - o);
    const __mmask16 m8 = __mmask16((1u << n) - 1), m16 = __mmask16((1u << (2 * n)) - 1);
    const __m512 t = _mm512_maskz_loadu_ps(m16, x0 + 2 * o);
    const __m512 u = _mm512_maskz_loadu_ps(m16, x1 + 2 * o);
    const __m512 a = _mm512_maskz_permutexvar_ps(all, even, t);
    const __m512 b = _mm512_maskz_permutexvar_ps(all, odd, t);
    const __m512 c = _mm512_maskz_permutexvar_ps(all, even, u);
    const __m512 d = _mm512_maskz_permutexvar_ps(all, odd, u);
    const __mmask16 tb = _mm512_cmp_ps_mask(a, b, _CMP_NGE_UQ);
    const __m512 best_ab = _mm512_mask_blend_ps(tb, a, b);
    const __mmask16 tc = _mm512_cmp_ps_mask(best_ab, c, _CMP_NGE_UQ);
    const __mmask16 td = _mm512_cmp_ps_mask(_mm512_mask_blend_ps(tc, best_ab, c), d, _CMP_NGE_UQ);
    const __mmask16 pc = __mmask16(tc & ~td), pb = __mmask16(tb & ~tc & ~td),
                    pa = __mmask16(~tb & ~tc & ~td);
    const __m512 v = _mm512_maskz_loadu_ps(m8, s + o);
    const __m512 top =
        _mm512_permutex2var_ps(_mm512_maskz_mov_ps(pa, v), weave, _mm512_maskz_mov_ps(pb, v));
    const __m512 bot =
        _mm512_permutex2var_ps(_mm512_maskz_mov_ps(pc, v), weave, _mm512_maskz_mov_ps(td, v));
    _mm512_mask_storeu_ps(y0 + 2 * o, m16, top);
    _mm512_mask_storeu_ps(y1 + 2 * o, m16, bot);
  }
}
#endif

using ir::Comparison;
using ir::ReduceKind;

// Per inner dimension: operand size, window count, window, stride, low padding, dilations.
struct Dim {
  int64_t in = 1, out = 1, win = 1, stride = 1, lo = 0, base = 1, wdil = 1;
};

// The valid window offsets [first, last) of output position o along d (2-D path: no base
// dilation): those whose position o * stride + k * wdil - lo lies in [0, in).
void valid_range(const Dim& d, int64_t o, int64_t& first, int64_t& last) {
  const int64_t p0 = o * d.stride - d.lo;
  first = p0 >= 0 ? 0 : (-p0 + d.wdil - 1) / d.wdil;
  const int64_t lim = d.in - p0;  // k * wdil < lim
  last = lim <= 0 ? 0 : std::min(d.win, (lim + d.wdil - 1) / d.wdil);
  if (last < first) last = first;
}

template <class C, ReduceKind K>
inline C init() {
  if constexpr (K == ReduceKind::sum) return C(0);
  if constexpr (K == ReduceKind::max) return -std::numeric_limits<C>::infinity();
  return std::numeric_limits<C>::infinity();
}

// max / min: the window's first extreme (equal values, +0 and -0 included, keep the first, as
// PyTorch's pooling), one maxss / minss each; NaN is tracked apart and propagated at the end
// (branches on unpredictable comparisons would cost more than the work).
template <class C, ReduceKind K>
inline C combine(C acc, C b) {
  if constexpr (K == ReduceKind::sum)
    return acc + b;
  else if constexpr (K == ReduceKind::max)
    return b > acc ? b : acc;
  else
    return b < acc ? b : acc;
}

// t ? a : b through integer masks: no branch on an unpredictable comparison.
template <class C>
inline C choose(bool t, C a, C b) {
  using U = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  const U m = U(0) - U(t);
  return std::bit_cast<C>(U((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & ~m)));
}

// StableHLO's select body: the current pick a stays while `a cmp b` holds.
template <class C, Comparison S>
inline bool keep(C a, C b) {
  if constexpr (S == Comparison::GE) return a >= b;
  if constexpr (S == Comparison::GT) return a > b;
  if constexpr (S == Comparison::LE) return a <= b;
  return a < b;
}

struct WindowKernel : Kernel {
  bool scatter = false;
  ReduceKind kind = ReduceKind::sum;
  Comparison select = Comparison::GE;
  DType dtype = DType::f32;
  int32_t x = -1, src = -1, out = -1;
  int64_t planes = 1, in_plane = 1, out_plane = 1;  // out_plane: windows (source) per plane
  std::vector<Dim> dims;                            // the inner dimensions
  bool two_d = false;                               // dims.size() == 2, no base dilation
  // f32 2x2 windows with stride 2 tiling the plane exactly: max pooling (a max reduce_window) and
  // its gradient (a GE select_and_scatter), in loops the compiler vectorizes; the scatter writes
  // each element once, no zero fill.
  bool pool2x2 = false;
  // 2-D path: the valid window offsets [first, last) per output row and column.
  std::vector<int64_t> hfirst, hlast, wfirst, wlast;

  // Calls fn(j) for the operand offset j (within the plane) of every in-bounds element of the
  // window at inner output index o, row-major (general path).
  template <class Fn>
  void window_general(const std::vector<int64_t>& o, std::vector<int64_t>& w, Fn&& fn) const {
    const size_t r = dims.size();
    std::fill(w.begin(), w.end(), 0);
    while (true) {
      int64_t j = 0;
      bool in = true;
      for (size_t d = 0; d < r && in; ++d) {
        const Dim& D = dims[d];
        const int64_t p = o[d] * D.stride + w[d] * D.wdil - D.lo;
        if (p < 0 || p % D.base != 0 || p / D.base >= D.in)
          in = false;
        else
          j = j * D.in + p / D.base;
      }
      if (in) fn(j);
      size_t d = r;
      while (d > 0) {
        --d;
        if (++w[d] < dims[d].win) break;
        w[d] = 0;
        if (d == 0) return;
      }
      if (r == 0) return;
    }
  }

  // The 2-D path. KH, KW > 0: the window's size, known at compile time (no window dilation):
  // windows wholly inside the input visit their elements in unrolled loops.
  // flatten: the window and element lambdas inlined (as calls they cost more than the work).
  template <int KH, int KW, class Fn>
  __attribute__((flatten)) void each_window_2d(Fn&& fn) const {
    const Dim &H = dims[0], &W = dims[1];
    const int64_t wn = W.in;
    for (int64_t oh = 0; oh < H.out; ++oh) {
      const int64_t hf = hfirst[size_t(oh)], hl = hlast[size_t(oh)];
      const int64_t h0 = oh * H.stride - H.lo;
      const bool full_h = KH > 0 && hf == 0 && hl == KH;
      for (int64_t ow = 0; ow < W.out; ++ow) {
        const int64_t w0 = ow * W.stride - W.lo, f = wfirst[size_t(ow)], l = wlast[size_t(ow)];
        if constexpr (KH > 0 && KW > 0) {
          if (full_h && f == 0 && l == KW) {
            const int64_t base = h0 * wn + w0;
            fn(oh * W.out + ow, [&](auto&& g) {
              for (int a = 0; a < KH; ++a)
                for (int b = 0; b < KW; ++b) g(base + a * wn + b);
            });
            continue;
          }
        }
        fn(oh * W.out + ow, [&](auto&& g) {
          for (int64_t kh = hf; kh < hl; ++kh) {
            const int64_t row = (h0 + kh * H.wdil) * wn + w0;
            for (int64_t kw = f; kw < l; ++kw) g(row + kw * W.wdil);
          }
        });
      }
    }
  }

  // Calls fn(k, visit) for each window k of one plane, where visit(g) calls g(j) for each
  // in-bounds element j of window k in row-major order.
  template <class Fn>
  void each_window(Fn&& fn) const {
    if (two_d) {
      const Dim &H = dims[0], &W = dims[1];
      const bool plain = H.wdil == 1 && W.wdil == 1;
      if (plain && H.win == 2 && W.win == 2) return each_window_2d<2, 2>(fn);
      if (plain && H.win == 3 && W.win == 3) return each_window_2d<3, 3>(fn);
      return each_window_2d<0, 0>(fn);
    }
    std::vector<int64_t> o(dims.size(), 0), w(dims.size(), 0);
    for (int64_t k = 0; k < out_plane; ++k) {
      fn(k, [&](auto&& g) { window_general(o, w, g); });
      for (size_t d = dims.size(); d > 0;) {
        --d;
        if (++o[d] < dims[d].out) break;
        o[d] = 0;
      }
    }
  }

  template <DType T, ReduceKind K>
  void reduce_planes(const Frame& f, int64_t p0, int64_t p1) const {
    if constexpr (T == DType::f32 && K == ReduceKind::max)
      if (pool2x2) return reduce_max_pool2x2(f, p0, p1);
    using C = Compute<T>;
    const void* xs = f.ptr[x];
    void* ys = f.ptr[out];
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ib = p * in_plane, ob = p * out_plane;
      each_window([&](int64_t k, auto&& visit) {
        C acc = init<C, K>();
        bool nan = false;
        visit([&](int64_t j) {
          const C v = load_elem<T>(xs, ib + j);
          acc = combine<C, K>(acc, v);
          if constexpr (K != ReduceKind::sum) nan |= v != v;
        });
        if constexpr (K != ReduceKind::sum)
          if (nan) acc = std::numeric_limits<C>::quiet_NaN();
        store_elem<T>(ys, ob + k, acc);
      });
    }
  }

  // reduce_planes<f32, max>'s bits: the chain acc = v > acc ? v : acc from -inf over a b / c d,
  // then the quiet NaN when any of the four is NaN.
  TLALOC_CLONES void reduce_max_pool2x2(const Frame& f, int64_t p0, int64_t p1) const {
    const float* X = static_cast<const float*>(f.ptr[x]);
    float* Y = static_cast<float*>(f.ptr[out]);
    const int64_t W = dims[1].in, OH = dims[0].out, OW = dims[1].out;
    const float qnan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float* x0 = X + p * in_plane + 2 * oh * W;
        const float* x1 = x0 + W;
        float* y = Y + p * out_plane + oh * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const float a = x0[2 * ow], b = x0[2 * ow + 1], c = x1[2 * ow], d = x1[2 * ow + 1];
          float acc = -std::numeric_limits<float>::infinity();
          acc = a > acc ? a : acc;
          acc = b > acc ? b : acc;
          acc = c > acc ? c : acc;
          acc = d > acc ? d : acc;
          const bool nan = (a != a) | (b != b) | (c != c) | (d != d);
          y[ow] = nan ? qnan : acc;
        }
      }
  }

  TLALOC_CLONES void scatter_pool2x2(const Frame& f, int64_t p0, int64_t p1) const {
    const float* X = static_cast<const float*>(f.ptr[x]);
    const float* SRC = static_cast<const float*>(f.ptr[src]);
    float* Y = static_cast<float*>(f.ptr[out]);
    const int64_t W = dims[1].in, OH = dims[0].out, OW = dims[1].out;
#if TLALOC_HOST_AVX2
    const bool avx512 = host_isa() == Isa::avx512;
#endif
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t oh = 0; oh < OH; ++oh) {
        const float* x0 = X + p * in_plane + 2 * oh * W;
        const float* x1 = x0 + W;
        float* y0 = Y + p * in_plane + 2 * oh * W;
        float* y1 = y0 + W;
        const float* s = SRC + p * out_plane + oh * OW;
#if TLALOC_HOST_AVX2
        if (avx512) {
          scatter_pool2x2_row_avx512(x0, x1, s, y0, y1, OW);
          continue;
        }
#endif
        for (int64_t ow = 0; ow < OW; ++ow) {
          // scatter_planes' pick in window order a b / c d: v is taken unless best >= v.
          const float a = x0[2 * ow], b = x0[2 * ow + 1], c = x1[2 * ow], d = x1[2 * ow + 1];
          float best = a;
          int pick = 0;
          bool t = !(best >= b);
          best = t ? b : best;
          pick = t ? 1 : pick;
          t = !(best >= c);
          best = t ? c : best;
          pick = t ? 2 : pick;
          t = !(best >= d);
          pick = t ? 3 : pick;
          const float v = s[ow];
          y0[2 * ow] = pick == 0 ? v : 0.0f;
          y0[2 * ow + 1] = pick == 1 ? v : 0.0f;
          y1[2 * ow] = pick == 2 ? v : 0.0f;
          y1[2 * ow + 1] = pick == 3 ? v : 0.0f;
        }
      }
  }

  template <DType T, Comparison S>
  void scatter_planes(const Frame& f, int64_t p0, int64_t p1) const {
    if constexpr (T == DType::f32 && S == Comparison::GE)
      if (pool2x2) return scatter_pool2x2(f, p0, p1);
    using C = Compute<T>;
    const void* xs = f.ptr[x];
    const void* ss = f.ptr[src];
    void* ys = f.ptr[out];
    constexpr bool half = T == DType::bf16 || T == DType::f16;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ib = p * in_plane, sb = p * out_plane;
      // The plane's sums: in the result itself, or in f32 scratch for bf16 / f16.
      C* acc = half ? reinterpret_cast<C*>(f.scratch) + ib : static_cast<C*>(ys) + ib;
      std::fill(acc, acc + in_plane, C(0));
      each_window([&](int64_t k, auto&& visit) {
        // best starts as NaN, which no select keeps: the first element is always taken.
        int64_t pick = -1;
        C best = std::numeric_limits<C>::quiet_NaN();
        visit([&](int64_t j) {
          const C v = load_elem<T>(xs, ib + j);
          const bool take = !keep<C, S>(best, v);
          pick = take ? j : pick;
          best = choose(take, v, best);
        });
        if (pick >= 0) acc[pick] += load_elem<T>(ss, sb + k);
      });
      if constexpr (half)
        for (int64_t j = 0; j < in_plane; ++j) store_elem<T>(ys, ib + j, acc[j]);
    }
  }

  template <DType T>
  void planes_of(const Frame& f, int64_t p0, int64_t p1) const {
    if (!scatter) {
      if (kind == ReduceKind::sum) return reduce_planes<T, ReduceKind::sum>(f, p0, p1);
      if (kind == ReduceKind::max) return reduce_planes<T, ReduceKind::max>(f, p0, p1);
      return reduce_planes<T, ReduceKind::min>(f, p0, p1);
    }
    switch (select) {
      case Comparison::GE:
        return scatter_planes<T, Comparison::GE>(f, p0, p1);
      case Comparison::GT:
        return scatter_planes<T, Comparison::GT>(f, p0, p1);
      case Comparison::LE:
        return scatter_planes<T, Comparison::LE>(f, p0, p1);
      default:
        return scatter_planes<T, Comparison::LT>(f, p0, p1);
    }
  }

  static void exec(const Kernel& kk, const Frame& f) {
    auto& k = as<WindowKernel>(kk);
    dispatch(k.dtype, [&]<DType T>() {
      if constexpr (T == DType::f32 || T == DType::f64 || T == DType::bf16 || T == DType::f16) {
        const int64_t work = k.planes * std::max(k.in_plane, k.out_plane);
        if (f.num_threads > 1 && k.planes > 1 && work >= kParallelElements) {
          const int n = int(std::min<int64_t>(int64_t(f.num_threads) * kPartsPerThread, k.planes));
          parallel(n, [&](int t, int P) {
            k.planes_of<T>(f, k.planes * t / P, k.planes * (t + 1) / P);
          });
        } else {
          k.planes_of<T>(f, 0, k.planes);
        }
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_window(const ir::Function& f, int32_t id) {
  const ir::Node& n = f.nodes[size_t(id)];
  const ir::Attrs& a = n.attrs;
  const Shape& xs = f.type(n.operands[0]).shape;
  auto k = std::make_unique<WindowKernel>();
  k->scatter = n.op == ir::Op::select_and_scatter;
  k->kind = a.reduce_kind;
  k->select = a.comparison_direction;
  k->dtype = n.type.dtype;
  k->x = n.operands[0];
  k->src = k->scatter ? n.operands[1] : -1;
  k->out = id;
  const Shape& ws = k->scatter ? f.type(n.operands[1]).shape : n.type.shape;  // window counts
  const int64_t r = xs.rank();
  auto base = [&](size_t i) { return k->scatter ? int64_t(1) : a.base_dilations[i]; };
  auto wdil = [&](size_t i) { return k->scatter ? int64_t(1) : a.window_dilations[i]; };
  // Leading dimensions with a trivial window are planes.
  int64_t lead = 0;
  while (lead < r) {
    const size_t i = size_t(lead);
    if (a.window_dimensions[i] != 1 || a.window_strides[i] != 1 || a.padding_low[i] != 0 ||
        a.padding_high[i] != 0 || base(i) != 1)
      break;
    k->planes *= xs[lead];
    ++lead;
  }
  for (int64_t d = lead; d < r; ++d) {
    const size_t i = size_t(d);
    k->dims.push_back(Dim{xs[d], ws[d], a.window_dimensions[i], a.window_strides[i],
                          a.padding_low[i], base(i), wdil(i)});
  }
  bool no_base =
      std::all_of(k->dims.begin(), k->dims.end(), [](const Dim& d) { return d.base == 1; });
  while (k->dims.size() < 2) k->dims.insert(k->dims.begin(), Dim{});  // as [1, n] / [1, 1]
  k->two_d = k->dims.size() == 2 && no_base;
  for (const Dim& d : k->dims) {
    k->in_plane *= d.in;
    k->out_plane *= d.out;
  }
  if (k->two_d) {
    auto ranges = [](const Dim& d, std::vector<int64_t>& first, std::vector<int64_t>& last) {
      first.resize(size_t(d.out));
      last.resize(size_t(d.out));
      for (int64_t o = 0; o < d.out; ++o) valid_range(d, o, first[size_t(o)], last[size_t(o)]);
    };
    ranges(k->dims[0], k->hfirst, k->hlast);
    ranges(k->dims[1], k->wfirst, k->wlast);
  }
  k->pool2x2 =
      k->two_d && k->dtype == DType::f32 &&
      (k->scatter ? k->select == Comparison::GE : k->kind == ReduceKind::max) &&
      std::all_of(k->dims.begin(), k->dims.end(), [](const Dim& d) {
        return d.win == 2 && d.stride == 2 && d.lo == 0 && d.wdil == 1 && d.in == 2 * d.out;
      });
  if (k->scatter && (k->dtype == DType::bf16 || k->dtype == DType::f16))
    k->scratch_bytes = xs.numel() * int64_t(sizeof(float));
  k->run = &WindowKernel::exec;
  k->reads = n.operands;
  k->writes = {id};
  k->label = fmt::format("{} {}", ir::op_name(n.op), to_string(n.type));
  return k;
}

}  // namespace tlaloc::runtime::host
