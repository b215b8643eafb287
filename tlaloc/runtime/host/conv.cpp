// convolution: every convolution (forward, and the input- and kernel-gradient convolutions
// autodiff derives) is one GEMM per feature group,
//   out[o, (b, q)] = sum over (f, k) of W[o, (f, k)] * col[(f, k), (b, q)],
// b the output batch, q the output window position, f the group's input feature, k the kernel
// position, o the output feature. col (im2col) is built per task in per-thread scratch for a
// range of rows (b, q) and of features f, reading the input in place through its strides (any
// dimension numbers; strides, padding, both dilations, groups); W is the kernel in canonical
// [O, f, k] order (permuted into scratch unless it already is). Results are stored straight into
// the output where its layout allows (spatial dims last, e.g. NCHW), else scattered from a tile.
// Tasks (group, row tile, K chunk) are fixed by the shapes; a K split into chunks (the
// kernel-gradient convolution: few rows, a huge K) is summed chunk by chunk in order, so the
// bits do not depend on the thread count. bf16 / f16 compute in f32.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tlaloc/runtime/host/conv_dnnl.h"
#include "tlaloc/runtime/host/copy.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {
namespace {

// Elements of a col tile (per thread): rows are chosen so that a tile of every feature fits,
// and features are split into sub-blocks (accumulated) past kColSplit.
constexpr int64_t kColTarget = int64_t(1) << 17;
constexpr int64_t kColSplit = int64_t(1) << 19;
// Work (multiply-adds) below which everything runs on the calling thread.
constexpr int64_t kParallelMacs = int64_t(1) << 20;

struct Task {
  int64_t g, r0, r1, f0, f1, chunk;  // group, rows [r0, r1), features [f0, f1), K chunk
};

struct ConvKernel : Kernel {
  DType dtype = DType::f32;
  int32_t lhs = -1, rhs = -1, out = -1;
  // Sizes: groups, output features per group, the group's input features, kernel positions,
  // output batch, output positions, rows (Nout * Q).
  int64_t G = 1, Og = 1, Cg = 1, Kp = 1, Nout = 1, Q = 1, R = 0;
  bool feature_groups = false, batch_groups = false;
  int64_t lb_stride = 0, lf_stride = 0;  // input batch / feature strides (elements)
  // Spatial dims (a virtual one of size 1 when there are none): output sizes, kernel sizes,
  // and per (k, q) the input offset or -1 (padding or a dilation hole).
  std::vector<int64_t> out_sp, k_sp;
  std::vector<std::vector<int64_t>> tab;
  bool unit_last = false;  // last dim: input offset = q + const where valid (memcpy runs)
  std::vector<int64_t> last_lo, last_hi, last_c;  // per k: valid q range, offset at q = 0
  // Output: batch / feature strides and each q's offset; direct: GEMMs store into it.
  int64_t ob_stride = 0, of_stride = 0;
  std::vector<int64_t> q_off;
  bool direct = false;
  // Kernel in canonical [O, Cg, Kp] (plan, or rhs itself when it already is).
  bool w_permute = false;
  CopyPlan w_plan;
  int64_t w_off = -1, w_half_off = -1, x_half_off = -1, part_off = -1;
  int64_t chunks = 1;
  std::vector<Task> tasks;
  int64_t rows_max = 0, cols_max = 0;  // per-thread col [cols_max * rows_max], tile, pack
  bool own = false;                    // sgemm_rows (f32, one K block, small)
  int64_t thread_bytes = 0, col_off = 0, tile_off = 0, pack_off = 0, pack_bytes = 0;

  // Rows [r0, r1) as runs along the last spatial dim: the input batch offset, the first q of
  // the last dim, the length, where the run starts in the tile, and the other dims' q.
  struct Run {
    int64_t base, ql, n, at;
  };
  void runs_of(const Task& t, std::vector<Run>* runs, std::vector<int64_t>* qs) const {
    const int64_t ns = int64_t(out_sp.size()), W = out_sp.back();
    for (int64_t r = t.r0; r < t.r1;) {
      const int64_t b = r / Q;
      int64_t q = r % Q;
      const int64_t ql = q % W, n = std::min(t.r1 - r, W - ql);
      q /= W;
      const int64_t first = int64_t(qs->size());
      qs->resize(size_t(first + ns - 1));
      for (int64_t s = ns - 2; s >= 0; --s) {
        (*qs)[size_t(first + s)] = q % out_sp[size_t(s)];
        q /= out_sp[size_t(s)];
      }
      const int64_t lb = batch_groups ? t.g * Nout + b : b;
      runs->push_back({lb * lb_stride, ql, n, r - t.r0});
      r += n;
    }
  }

  // col[(f - f0) * Kp + k, r - r0] for the task's rows: the input at the window position, or 0.
  // Kernel positions k = (outer dims, last dim): a run's outer offset is found once for every
  // last-dim position.
  template <class T>
  void im2col(const T* x, const Task& t, const std::vector<Run>& runs,
              const std::vector<int64_t>& qs, int64_t f0, int64_t f1, T* col) const {
    const int64_t ld = t.r1 - t.r0, ns = int64_t(out_sp.size()), W = out_sp.back();
    const int64_t KW = k_sp.back(), Kouter = Kp / KW;
    int64_t kk[16] = {};
    for (int64_t f = f0; f < f1; ++f) {
      const int64_t fo = (feature_groups ? t.g * Cg + f : f) * lf_stride;
      std::fill_n(kk, ns, 0);
      for (int64_t ko = 0; ko < Kouter; ++ko) {
        T* dst = col + ((f - f0) * Kp + ko * KW) * ld;
        for (size_t i = 0; i < runs.size(); ++i) {
          const Run& u = runs[i];
          int64_t off = u.base + fo;
          bool valid = true;
          for (int64_t s = 0; s + 1 < ns && valid; ++s) {
            const int64_t v =
                tab[size_t(s)]
                   [size_t(kk[s] * out_sp[size_t(s)] + qs[i * size_t(ns - 1) + size_t(s)])];
            valid = v >= 0;
            off += v;
          }
          for (int64_t kl = 0; kl < KW; ++kl) {
            T* d = dst + kl * ld + u.at;
            if (!valid) {
              for (int64_t j = 0; j < u.n; ++j) d[j] = T(0);
            } else if (unit_last) {  // zeros, a copy, zeros: short runs, inline loops
              const int64_t a = std::clamp(last_lo[size_t(kl)], u.ql, u.ql + u.n) - u.ql;
              const int64_t e = std::clamp(last_hi[size_t(kl)] - u.ql, a, u.n);
              const int64_t s0 = off + last_c[size_t(kl)] + u.ql;
              for (int64_t j = 0; j < a; ++j) d[j] = T(0);
              for (int64_t j = a; j < e; ++j) d[j] = x[s0 + j];
              for (int64_t j = e; j < u.n; ++j) d[j] = T(0);
            } else {
              const int64_t* tl = tab[size_t(ns - 1)].data() + kl * W + u.ql;
              for (int64_t j = 0; j < u.n; ++j) d[j] = tl[j] < 0 ? T(0) : x[off + tl[j]];
            }
          }
        }
        for (int64_t s = ns - 2; s >= 0; --s) {  // next outer kernel position
          if (++kk[s] < k_sp[size_t(s)]) break;
          kk[s] = 0;
        }
      }
    }
  }

  // C[Og, rows] (ldc) = or += W_g[Og, f-block] col[f-block, rows].
  template <class T>
  void gemm(const T* w, const T* col, int64_t rows, int64_t kc, T* C, int64_t ldc, bool acc,
            float* pack) const {
    const int64_t K = Cg * Kp;
    if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(Og), int(rows), int(kc), 1.0, w,
                  int(K), col, int(rows), acc ? 1.0 : 0.0, C, int(ldc));
    } else {
      if (own && !acc) {
        sgemm_rows(false, false, 0, Og, rows, kc, w, K, col, rows, C, ldc, pack);
        return;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(Og), int(rows), int(kc), 1.0f, w,
                  int(K), col, int(rows), acc ? 1.0f : 0.0f, C, int(ldc));
    }
  }

  // Writes tile C[Og, rows r0..r1) of group g into the output (dtype conversion included).
  template <class T>
  void scatter(const T* C, int64_t ldc, int64_t g, int64_t r0, int64_t r1, void* o) const {
    dispatch(dtype, [&]<DType D>() {
      if constexpr (D == DType::f32 || D == DType::f64 || D == DType::bf16 || D == DType::f16) {
        for (int64_t j = 0; j < Og; ++j) {
          const int64_t base = (g * Og + j) * of_stride;
          for (int64_t r = r0; r < r1; ++r)
            store_elem<D>(o, base + (r / Q) * ob_stride + q_off[size_t(r % Q)],
                          Compute<D>(C[j * ldc + (r - r0)]));
        }
      }
    });
  }

  template <class T>
  void run_task(const Task& t, const T* x, const T* w, void* o, char* scratch, const Frame& f,
                int thread) const {
    char* mine = f.scratch + col_off + thread * thread_bytes;
    T* col = reinterpret_cast<T*>(mine);
    T* tile = reinterpret_cast<T*>(mine + tile_off);
    float* pack = reinterpret_cast<float*>(mine + pack_off);
    const int64_t rows = t.r1 - t.r0;
    T* C = tile;
    int64_t ldc = rows;
    if (chunks > 1) {
      C = reinterpret_cast<T*>(scratch + part_off) + (t.chunk * G + t.g) * Og * R + t.r0;
      ldc = R;
    } else if (direct) {
      C = static_cast<T*>(o) + g_off(t.g) + (t.r0 / Q) * ob_stride + q_off[size_t(t.r0 % Q)];
      ldc = Og == 1 ? std::max(of_stride, rows) : of_stride;  // one row: any ldc >= rows
    }
    std::vector<Run> runs;
    std::vector<int64_t> qs;
    runs_of(t, &runs, &qs);
    const int64_t fs = std::max<int64_t>(1, cols_max / Kp);
    for (int64_t f0 = t.f0; f0 < t.f1; f0 += fs) {
      const int64_t f1 = std::min(t.f1, f0 + fs);
      im2col(x, t, runs, qs, f0, f1, col);
      gemm(w + (t.g * Og) * Cg * Kp + f0 * Kp, col, rows, (f1 - f0) * Kp, C, ldc, f0 > t.f0, pack);
    }
    if (chunks == 1 && !direct) scatter(C, ldc, t.g, t.r0, t.r1, o);
  }
  int64_t g_off(int64_t g) const { return g * Og * of_stride; }

  template <class T>
  void exec_typed(const Frame& f) const {
    const bool half = dtype == DType::bf16 || dtype == DType::f16;
    const void* xp = f.ptr[lhs];
    const void* wp = f.ptr[rhs];
    if (half) {  // inputs to f32 in scratch
      auto widen = [&](const void* src, int64_t n, int64_t at) {
        float* d = reinterpret_cast<float*>(f.scratch + at);
        const auto* s = static_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; ++i)
          d[i] = dtype == DType::bf16 ? from_bf16(s[i]) : from_f16(s[i]);
        return static_cast<const void*>(d);
      };
      xp = widen(xp, x_numel, x_half_off);
      wp = widen(wp, G * Og * Cg * Kp, w_half_off);
    }
    if (w_permute) {
      w_plan.run(f.scratch + w_off, wp, 0, 0, f.num_threads);
      wp = f.scratch + w_off;
    }
    const T* x = static_cast<const T*>(xp);
    const T* w = static_cast<const T*>(wp);
    void* o = f.ptr[out];
    const bool par = f.num_threads > 1 && tasks.size() > 1 && R * G * Og * Cg * Kp >= kParallelMacs;
    auto each = [&](size_t n, auto&& fn) {
      if (!par) {
        for (size_t i = 0; i < n; ++i) fn(i, 0);
        return;
      }
      parallel(int(std::min<size_t>(n, 64)), [&](int p, int P) {
        for (size_t i = n * size_t(p) / size_t(P); i < n * size_t(p + 1) / size_t(P); ++i)
          fn(i, team_thread());
      });
    };
    each(tasks.size(), [&](size_t i, int th) { run_task(tasks[i], x, w, o, f.scratch, f, th); });
    if (chunks > 1) {  // partial sums of the K chunks, added in chunk order
      const T* part = reinterpret_cast<const T*>(f.scratch + part_off);
      const size_t n = size_t(G) * size_t(tile_count);
      each(n, [&](size_t i, int th) {
        const int64_t g = int64_t(i) / tile_count, tr = int64_t(i) % tile_count;
        const int64_t r0 = R * tr / tile_count, r1 = R * (tr + 1) / tile_count;
        T* acc = reinterpret_cast<T*>(f.scratch + col_off + th * thread_bytes + tile_off);
        for (int64_t j = 0; j < Og; ++j)
          for (int64_t r = r0; r < r1; ++r) {
            T s = part[(g * Og + j) * R + r];
            for (int64_t c = 1; c < chunks; ++c) s += part[((c * G + g) * Og + j) * R + r];
            acc[j * (r1 - r0) + (r - r0)] = s;
          }
        scatter(acc, r1 - r0, g, r0, r1, o);
      });
    }
  }
  int64_t x_numel = 0, tile_count = 1;

  static void exec(const Kernel& k, const Frame& f) {
    const auto& c = as<ConvKernel>(k);
    if (c.R == 0 || c.G * c.Og == 0) return;
    if (c.Cg * c.Kp == 0) {  // empty sum
      dispatch(c.dtype, [&]<DType D>() {
        if constexpr (D == DType::f32 || D == DType::f64 || D == DType::bf16 || D == DType::f16) {
          const int64_t n = c.R * c.G * c.Og;
          for (int64_t i = 0; i < n; ++i) store_elem<D>(f.ptr[c.out], i, Compute<D>(0));
        }
      });
      return;
    }
    if (c.dtype == DType::f64)
      c.exec_typed<double>(f);
    else
      c.exec_typed<float>(f);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_conv(const ir::Function& fn, int32_t id, int num_threads) {
  const ir::Node& n = fn.nodes[size_t(id)];
  if (const auto s = conv2d_of(fn, n))  // 2-D NCHW f32: oneDNN, unless it declines
    if (auto k = make_conv2d_dnnl(*s, Conv2dPass::forward, n.operands[0], n.operands[1], id,
                                  num_threads))
      return k;
  const ir::Attrs& a = n.attrs;
  const ir::ConvDimensionNumbers& d = a.conv_dimension_numbers;
  const Shape& xs = fn.type(n.operands[0]).shape;
  const Shape& ks = fn.type(n.operands[1]).shape;
  const Shape& os = n.type.shape;
  auto k = std::make_unique<ConvKernel>();
  k->dtype = n.type.dtype;
  k->lhs = n.operands[0];
  k->rhs = n.operands[1];
  k->out = id;
  k->x_numel = xs.numel();
  k->feature_groups = a.feature_group_count > 1;
  k->batch_groups = a.batch_group_count > 1;
  k->G = std::max(a.feature_group_count, a.batch_group_count);
  const int64_t O = ks[d.kernel_output_feature_dimension];
  k->Og = O / k->G;
  k->Cg = ks[d.kernel_input_feature_dimension];
  k->Nout = os[d.output_batch_dimension];
  const auto xst = xs.strides(), ost = os.strides();
  k->lb_stride = xst[size_t(d.input_batch_dimension)];
  k->lf_stride = xst[size_t(d.input_feature_dimension)];
  k->ob_stride = ost[size_t(d.output_batch_dimension)];
  k->of_stride = ost[size_t(d.output_feature_dimension)];
  // Spatial dims, with a virtual one of size 1 when there is none.
  struct Sp {
    int64_t in, in_stride, out, out_stride, k, stride, pad, ld, rd;
  };
  std::vector<Sp> sp;
  for (size_t i = 0; i < d.input_spatial_dimensions.size(); ++i)
    sp.push_back({xs[d.input_spatial_dimensions[i]], xst[size_t(d.input_spatial_dimensions[i])],
                  os[d.output_spatial_dimensions[i]], ost[size_t(d.output_spatial_dimensions[i])],
                  ks[d.kernel_spatial_dimensions[i]], a.window_strides[i], a.padding_low[i],
                  a.lhs_dilation[i], a.rhs_dilation[i]});
  if (sp.empty()) sp.push_back({1, 0, 1, 0, 1, 1, 0, 1, 1});
  if (sp.size() > 16) fail("host runtime: convolution with {} > 16 spatial dims", sp.size());
  k->Kp = 1;
  k->Q = 1;
  for (const Sp& s : sp) {
    k->Kp *= s.k;
    k->Q *= s.out;
    k->out_sp.push_back(s.out);
    k->k_sp.push_back(s.k);
    std::vector<int64_t> t(size_t(s.k * s.out), -1);
    for (int64_t kk = 0; kk < s.k; ++kk)
      for (int64_t q = 0; q < s.out; ++q) {
        const int64_t p = q * s.stride + kk * s.rd - s.pad;
        if (p >= 0 && p % s.ld == 0 && p / s.ld < s.in)
          t[size_t(kk * s.out + q)] = p / s.ld * s.in_stride;
      }
    k->tab.push_back(std::move(t));
  }
  const Sp& last = sp.back();
  k->unit_last = last.ld == 1 && last.stride * last.in_stride == 1;
  if (k->unit_last)
    for (int64_t kk = 0; kk < last.k; ++kk) {
      const int64_t c = kk * last.rd - last.pad;  // input index at q = 0
      k->last_c.push_back(c);
      k->last_lo.push_back(std::clamp<int64_t>(-c, 0, last.out));
      k->last_hi.push_back(std::clamp<int64_t>(last.in - c, k->last_lo.back(), last.out));
    }
  k->R = k->Nout * k->Q;
  // Output offsets of q; direct stores need q contiguous (spatial dims last, row-major).
  bool q_contiguous = true;
  int64_t expect = 1;
  for (size_t i = sp.size(); i-- > 0;) {
    q_contiguous = q_contiguous && (sp[i].out == 1 || sp[i].out_stride == expect);
    expect *= sp[i].out;
  }
  for (int64_t q = 0; q < k->Q; ++q) {
    int64_t r = q, off = 0;
    for (size_t i = sp.size(); i-- > 0;) {
      off += (r % sp[i].out) * sp[i].out_stride;
      r /= sp[i].out;
    }
    k->q_off.push_back(off);
  }
  const bool half = k->dtype == DType::bf16 || k->dtype == DType::f16;
  const size_t elem = half ? 4 : size_of(k->dtype);
  // Tiles: rows so that a col tile of all features is about kColTarget elements (at least 64
  // rows); whole batch elements when Q is small, else pieces of one element's positions.
  const int64_t K = k->Cg * k->Kp;
  const int64_t rows_cap =
      std::max<int64_t>(64, kColTarget / std::max<int64_t>(1, std::min<int64_t>(K, 512)));
  std::vector<std::pair<int64_t, int64_t>> tiles;
  if (k->Q <= rows_cap) {
    const int64_t ntile = std::max<int64_t>(1, (k->R + rows_cap - 1) / rows_cap);
    int64_t per = (k->Nout + ntile - 1) / ntile;                      // batch elements per tile
    if (q_contiguous && k->ob_stride != k->Q && k->Q >= 64) per = 1;  // direct stores (NCHW)
    for (int64_t b = 0; b < k->Nout; b += per)
      tiles.push_back({b * k->Q, std::min(k->Nout, b + per) * k->Q});
    k->direct = q_contiguous && (per == 1 || k->ob_stride == k->Q);
  } else {
    const int64_t pieces = (k->Q + rows_cap - 1) / rows_cap;
    for (int64_t b = 0; b < k->Nout; ++b)
      for (int64_t p = 0; p < pieces; ++p)
        tiles.push_back({b * k->Q + k->Q * p / pieces, b * k->Q + k->Q * (p + 1) / pieces});
    k->direct = q_contiguous;
  }
  k->direct = k->direct && !half;
  for (auto [r0, r1] : tiles) k->rows_max = std::max(k->rows_max, r1 - r0);
  // Feature sub-blocks when a tile of all features would pass kColSplit; chunks (summed in
  // order) when there are few tiles to share among threads.
  int64_t nsub = std::max<int64_t>(1, (K * k->rows_max + kColSplit - 1) / kColSplit);
  nsub = std::min(nsub, k->Cg);
  const int64_t fs = (k->Cg + nsub - 1) / nsub;
  nsub = (k->Cg + fs - 1) / fs;
  k->cols_max = fs * k->Kp;
  const int64_t ntasks = k->G * int64_t(tiles.size());
  k->chunks = ntasks >= 8 || nsub == 1 ? 1 : std::min<int64_t>(nsub, 8 / ntasks + 1);
  if (k->chunks > 1) k->tile_count = std::max<int64_t>(1, std::min<int64_t>(8, k->R / 64));
  for (int64_t g = 0; g < k->G; ++g)
    for (auto [r0, r1] : tiles)
      for (int64_t c = 0; c < k->chunks; ++c) {
        const int64_t s0 = nsub * c / k->chunks, s1 = nsub * (c + 1) / k->chunks;
        k->tasks.push_back({g, r0, r1, std::min(k->Cg, s0 * fs), std::min(k->Cg, s1 * fs), c});
      }
  k->own = k->dtype != DType::f64 && nsub == 1 && K <= 512 && k->Og * k->rows_max <= (1 << 16) &&
           sgemm_rows_available();
  // Kernel canonical [O, Cg, k...]: permuted unless rhs is f32 / f64 in that order already.
  std::vector<int64_t> order{d.kernel_output_feature_dimension, d.kernel_input_feature_dimension};
  order.insert(order.end(), d.kernel_spatial_dimensions.begin(), d.kernel_spatial_dimensions.end());
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == int64_t(i);
  int64_t off = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = off;
    off += (bytes + 63) / 64 * 64;
    return at;
  };
  if (half) {
    k->x_half_off = take(xs.numel() * 4);
    k->w_half_off = take(ks.numel() * 4);
  }
  if (!identity) {
    k->w_permute = true;
    Shape box;
    std::vector<int64_t> src;
    const auto kst = ks.strides();
    for (int64_t dd : order) {
      box.dims.push_back(ks[dd]);
      src.push_back(kst[size_t(dd)]);
    }
    k->w_plan.dims = box.dims;
    k->w_plan.dst_strides = box.strides();
    k->w_plan.src_strides = src;
    k->w_plan.elem_size = elem;
    k->w_plan.collapse();
    k->w_off = take(ks.numel() * int64_t(elem));
  }
  if (k->chunks > 1) k->part_off = take(k->chunks * k->G * k->Og * k->R * int64_t(elem));
  const int64_t acc_rows = k->chunks > 1 ? (k->R + k->tile_count - 1) / k->tile_count + 1 : 0;
  k->tile_off = (k->cols_max * k->rows_max * int64_t(elem) + 63) / 64 * 64;
  k->pack_off =
      k->tile_off + (k->Og * std::max(k->rows_max, acc_rows) * int64_t(elem) + 63) / 64 * 64;
  k->pack_bytes = k->own ? (sgemm_rows_pack_floats(false, k->rows_max, K) * 4 + 63) / 64 * 64 : 0;
  k->thread_bytes = k->pack_off + k->pack_bytes;
  k->col_off = off;
  k->scratch_bytes = off + k->thread_bytes * std::max(num_threads, 1);
  k->run = &ConvKernel::exec;
  k->reads = n.operands;
  k->writes = {id};
  k->label = fmt::format("convolution rows={} K={} O={} groups={} tasks={} chunks={}", k->R, K, O,
                         k->G, k->tasks.size(), k->chunks);
  return k;
}

}  // namespace tlaloc::runtime::host
