// dot_general: each operand is read as a batch of row-major matrices, lhs [B, M, K] or
// [B, K, M] (transposed) and rhs [B, K, N] or [B, N, K], chosen from its dimension order so
// that common layouts pass transpose flags instead of being copied; any other layout is
// permuted into [batch, free, contracting] in scratch first. Per batch element (and tile) one
// GEMM: tlaloc's packed AVX2 kernel for small f32 ones, else cblas_?gemm. bf16 operands: the bf16
// GEMM (gemm_bf16.h: vdpbf16ps, or a fallback with its bits), f32 accumulation. f16: operands
// converted to f32, an f32 GEMM. A bf16 / f16 result is the f32 one rounded to nearest even.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "tlaloc/runtime/host/copy.h"
#include "tlaloc/runtime/host/gemm_bf16.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {
namespace {

struct Operand {
  int32_t value = -1;
  bool f32 = false;      // a bf16 dot's operand read as f32 and rounded while packed
  bool trans = false;    // matrix stored transposed relative to [M,K] (lhs) / [K,N] (rhs)
  bool permute = false;  // copy through `plan` into scratch first
  CopyPlan plan;
  int64_t half_off = -1, perm_off = -1;  // scratch offsets (f32 copy of a half operand; permuted)
};

// GEMM work (multiply-adds) below which tiles run on the calling thread: a fork costs more.
constexpr int64_t kParallelMacs = int64_t(1) << 20;

// One gemm call: batch b, result rows [m0, m1) and columns [n0, n1).
struct Tile {
  int64_t b, m0, m1, n0, n1;
};

struct DotKernel : Kernel {
  std::vector<Tile> tiles;  // fixed by the shapes, so results do not depend on threads

  // The leading dimension of operand o's matrices: lhs [M, K] or [K, M], rhs [K, N] or [N, K].
  int64_t ld(const Operand& o) const { return &o == &l ? (o.trans ? M : K) : (o.trans ? K : N); }

  // `thread`: whose pack buffer in scratch to use (team_thread() in a part, else 0).
  void gemm(const Tile& t, const void* L, const void* R, void* O, const Frame& f,
            int thread) const {
    auto ta = l.trans ? CblasTrans : CblasNoTrans, tb = r.trans ? CblasTrans : CblasNoTrans;
    int lda = int(std::max<int64_t>(ld(l), 1)), ldb = int(std::max<int64_t>(ld(r), 1));
    int64_t a_off = t.b * M * K + (l.trans ? t.m0 : t.m0 * K);
    int64_t b_off = t.b * K * N + (r.trans ? t.n0 * K : t.n0);
    int64_t c_off = t.b * M * N + t.m0 * N + t.n0;
    int m = int(t.m1 - t.m0), n = int(t.n1 - t.n0);
    if (in_dtype == DType::bf16) {
      auto go = [&](const auto* A, const auto* Bm) {
        bf16_gemm_rows(l.trans, r.trans, 0, m, n, K, A + a_off, lda, Bm + b_off, ldb,
                       static_cast<float*>(O) + c_off, N,
                       f.scratch + pack_off + thread * pack_bytes,
                       bias < 0 ? nullptr : static_cast<const float*>(f.ptr[bias]) + t.n0,
                       addend < 0 ? nullptr : static_cast<const float*>(f.ptr[addend]) + c_off,
                       Bf16GemmPath::best, prepacked(f));
      };
      const auto *Lh = static_cast<const uint16_t*>(L), *Rh = static_cast<const uint16_t*>(R);
      const auto *Lf = static_cast<const float*>(L), *Rf = static_cast<const float*>(R);
      if (l.f32)
        r.f32 ? go(Lf, Rf) : go(Lf, Rh);
      else
        r.f32 ? go(Lh, Rf) : go(Lh, Rh);
      return;
    }
    if (own) {
      auto* pack = reinterpret_cast<float*>(f.scratch + pack_off + thread * pack_bytes);
      sgemm_rows(l.trans, r.trans, 0, m, n, K, static_cast<const float*>(L) + a_off, lda,
                 static_cast<const float*>(R) + b_off, ldb, static_cast<float*>(O) + c_off, N, pack,
                 bias < 0 ? nullptr : static_cast<const float*>(f.ptr[bias]) + t.n0,
                 addend < 0 ? nullptr : static_cast<const float*>(f.ptr[addend]) + c_off);
      return;
    }
    if (dtype == DType::f64)
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, int(K), 1.0, static_cast<const double*>(L) + a_off,
                  lda, static_cast<const double*>(R) + b_off, ldb, 0.0,
                  static_cast<double*>(O) + c_off, int(N));
    else
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, int(K), 1.0f, static_cast<const float*>(L) + a_off,
                  lda, static_cast<const float*>(R) + b_off, ldb, 0.0f,
                  static_cast<float*>(O) + c_off, int(N));
    epilogue(t, O, f);
  }
  // bf16, several tiles of one matrix: the operand every tile reads whole (rhs when tiles split
  // rows, else lhs), packed once into scratch (pre_off) by prepack.
  Bf16Prepacked prepacked(const Frame& f) const {
    if (pre_off < 0) return {};
    const char* p = f.scratch + pre_off;
    return split_rows ? Bf16Prepacked{nullptr, p} : Bf16Prepacked{p, nullptr};
  }
  void prepack(const void* L, const void* R, const Frame& f) const {
    const Operand& o = split_rows ? r : l;
    const int64_t X = split_rows ? N : M, unit = split_rows ? 32 : 12;
    const int64_t panels = (X + unit - 1) / unit;
    const void* src = split_rows ? R : L;
    const int64_t ldo = ld(o);
    void* dst = f.scratch + pre_off;
    auto part = [&](int t, int T) {  // whole panels [x0, x1)
      const int64_t x0 = panels * t / T * unit, x1 = std::min(X, panels * (t + 1) / T * unit);
      if (o.f32)
        bf16_gemm_prepack(!split_rows, o.trans, K, static_cast<const float*>(src), ldo, dst, x0,
                          x1);
      else
        bf16_gemm_prepack(!split_rows, o.trans, K, static_cast<const uint16_t*>(src), ldo, dst, x0,
                          x1);
    };
    parallel(int(std::min<int64_t>(int64_t(f.num_threads) * kPartsPerThread, panels)), part);
  }
  // Tile t of the f32 result in scratch O rounded into the bf16 / f16 output; with round_f32,
  // rounded in place in O (the f32 output): to bf16 / f16 and back.
  void round_tile(const Tile& t, const void* O, const Frame& f) const {
    const int64_t c_off = t.b * M * N + t.m0 * N + t.n0, n = t.n1 - t.n0;
    const auto* s = static_cast<const float*>(O) + c_off;
    if (round_f32) {
      auto* c = static_cast<float*>(f.ptr[out]) + c_off;
      for (int64_t i = 0; i < t.m1 - t.m0; ++i)
        if (dtype == DType::bf16)
          round_to_bf16(c + i * N, c + i * N, true, n);
        else
          for (int64_t j = 0; j < n; ++j) c[i * N + j] = from_f16(to_f16(c[i * N + j]));
      return;
    }
    auto* o = static_cast<uint16_t*>(f.ptr[out]) + c_off;
    for (int64_t i = 0; i < t.m1 - t.m0; ++i)
      if (dtype == DType::bf16)
        round_to_bf16(s + i * N, o + i * N, false, n);
      else
        for (int64_t j = 0; j < n; ++j) o[i * N + j] = to_f16(s[i * N + j]);
  }
  // The epilogue (dot_add_epilogue) on tile t of result O after an OpenBLAS GEMM or none (K 0;
  // tlaloc's GEMM adds it as it stores each tile): the bias, then the matrix addend.
  void epilogue(const Tile& t, void* O, const Frame& f) const {
    const int64_t c_off = t.b * M * N + t.m0 * N + t.n0;
    auto go = [&](auto* c) {
      using T = std::remove_pointer_t<decltype(c)>;
      const T* b = bias < 0 ? nullptr : static_cast<const T*>(f.ptr[bias]) + t.n0;
      const T* a = addend < 0 ? nullptr : static_cast<const T*>(f.ptr[addend]) + c_off;
      for (int64_t i = 0; i < t.m1 - t.m0; ++i)
        for (int64_t j = 0; j < t.n1 - t.n0; ++j) {
          if (b) c[i * N + j] += b[j];
          if (a) c[i * N + j] += a[i * N + j];
        }
    };
    if (bias < 0 && addend < 0) return;
    if (dtype == DType::f64)
      go(static_cast<double*>(O) + c_off);
    else
      go(static_cast<float*>(O) + c_off);
  }

  DType dtype;     // the result's
  DType in_dtype;  // the operands' (bf16 / f16 with an f32 result: preferred_element_type)
  // Small f32 GEMMs (K <= 512, M * N <= 2^16): tlaloc's sgemm_rows instead of OpenBLAS (no
  // beta pass, less call overhead; packing per call sized to the problem). Larger ones stay
  // with OpenBLAS, faster there.
  bool own = false;
  int64_t pack_off = -1, pack_bytes = 0;  // sgemm_rows' pack buffer per thread, in scratch
  int64_t pre_off = -1;                   // bf16: the shared operand pre-packed, or -1
  bool split_rows = true;                 // tiles split the result's rows (else columns)
  int32_t out = -1;
  // write_converted: `out` is the f32 convert of the bf16 / f16 result, written directly.
  bool round_f32 = false;
  int32_t bias = -1;    // dot_add_epilogue: [N] added to every result row, or -1
  int32_t addend = -1;  // dot_add_epilogue: the result's type, added after the bias, or -1
  int64_t B = 1, M = 1, N = 1, K = 1;
  Operand l, r;
  int64_t out_off = -1;  // f32 result in scratch for half types

  // Returns the pointer to the operand matrices as f32/f64, converting / permuting.
  const void* prepare(const Operand& o, int64_t numel, const Frame& f) const {
    const void* p = f.ptr[o.value];
    if (in_dtype == DType::f16) {  // (bf16 operands go to the bf16 GEMM as they are)
      auto* d = reinterpret_cast<float*>(f.scratch + o.half_off);
      const auto* s = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < numel; ++i) d[i] = from_f16(s[i]);
      p = d;
    }
    if (o.permute) {
      o.plan.run(f.scratch + o.perm_off, p, 0, 0, f.num_threads);
      p = f.scratch + o.perm_off;
    }
    return p;
  }

  static void exec(const Kernel& k, const Frame& f) {
    const auto& d = as<DotKernel>(k);
    const void* L = d.prepare(d.l, d.B * d.M * d.K, f);
    const void* R = d.prepare(d.r, d.B * d.K * d.N, f);
    bool half = d.dtype == DType::bf16 || d.dtype == DType::f16;
    void* O = half && !d.round_f32 ? f.scratch + d.out_off : f.ptr[d.out];
    int64_t on = d.B * d.M * d.N;
    if (on == 0) return;
    // A bf16 / f16 result: each tile rounded from the f32 scratch as soon as it is computed, on
    // the thread that computed it.
    auto run = [&](const Tile& t, int thread) {
      d.gemm(t, L, R, O, f, thread);
      if (half) d.round_tile(t, O, f);
    };
    if (d.pre_off >= 0 && d.K > 0) d.prepack(L, R, f);
    if (d.K == 0) {
      std::memset(O, 0, size_t(on) * (d.dtype == DType::f64 ? 8 : 4));
      for (const Tile& t : d.tiles) {
        d.epilogue(t, O, f);
        if (half) d.round_tile(t, O, f);
      }
    } else if (d.tiles.size() > 1 && f.num_threads > 1 && d.B * d.M * d.N * d.K >= kParallelMacs) {
      // A part per tile. Team threads are OpenMP threads: the OpenMP build of OpenBLAS keeps
      // per-thread buffers by omp_get_thread_num() and is unsafe from several non-OpenMP
      // threads at once.
      const size_t nt = d.tiles.size();
      parallel(int(nt), [&](int t, int T) {
        for (size_t i = nt * size_t(t) / size_t(T); i < nt * size_t(t + 1) / size_t(T); ++i)
          run(d.tiles[i], team_thread());
      });
    } else {
      for (const Tile& t : d.tiles) run(t, 0);
    }
  }
};

bool is_identity(const std::vector<int64_t>& order) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != int64_t(i)) return false;
  return true;
}
std::vector<int64_t> cat(std::vector<int64_t> a, const std::vector<int64_t>& b,
                         const std::vector<int64_t>& c) {
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

// Sets up operand o with batch dims `batch`, contracting dims `con` over `shape`; `lhs` picks
// the canonical order: lhs [batch, free, con], rhs [batch, con, free].
void plan_operand(Operand& o, const Shape& shape, const std::vector<int64_t>& batch,
                  const std::vector<int64_t>& con, bool lhs, size_t elem) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < shape.rank(); ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(con.begin(), con.end(), d) == con.end())
      free.push_back(d);
  auto canon = lhs ? cat(batch, free, con) : cat(batch, con, free);
  auto swapped = lhs ? cat(batch, con, free) : cat(batch, free, con);
  if (is_identity(canon)) return;
  if (is_identity(swapped)) {
    o.trans = true;
    return;
  }
  o.permute = true;
  Shape box;
  std::vector<int64_t> src;
  auto st = shape.strides();
  for (int64_t d : canon) {
    box.dims.push_back(shape[d]);
    src.push_back(st[size_t(d)]);
  }
  o.plan.dims = box.dims;
  o.plan.dst_strides = box.strides();
  o.plan.src_strides = src;
  o.plan.elem_size = elem;
  o.plan.collapse();
}

// Says once per process, on stderr, when bf16 GEMMs run on a fallback (no AVX-512 BF16, or
// TLALOC_BF16_GEMM asks for it). Throws tlaloc::Error for a bad TLALOC_BF16_GEMM.
void note_bf16_path() {
  const Bf16GemmPath p = bf16_gemm_path(Bf16GemmPath::best);
  if (p == Bf16GemmPath::native) return;
  static std::once_flag once;
  std::call_once(once, [p] {
    std::fprintf(
        stderr,
        "tlaloc: note: bf16 matmuls run on the %s fallback (%s): the bits of AVX-512 "
        "BF16, at a fraction of its speed\n",
        p == Bf16GemmPath::avx2 ? "AVX2" : "scalar",
        bf16_gemm_native() ? "TLALOC_BF16_GEMM asks for it" : "this CPU has no AVX-512 BF16");
  });
}

int64_t prod(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= s[d];
  return p;
}

}  // namespace

bool dot_add_epilogue(Kernel& k, int32_t v, bool row) {
  if (k.run != &DotKernel::exec) return false;
  auto& d = static_cast<DotKernel&>(k);
  if ((d.dtype != DType::f32 && d.dtype != DType::f64) || d.addend >= 0 || (row && d.bias >= 0))
    return false;
  (row ? d.bias : d.addend) = v;
  d.reads.push_back(v);
  d.label += row ? " + bias" : " + addend";
  return true;
}

TLALOC_CLONES void round_to_bf16(const float* src, void* dst, bool wide, int64_t n) {
  if (wide)
    for (int64_t j = 0; j < n; ++j) static_cast<float*>(dst)[j] = from_bf16(to_bf16(src[j]));
  else
    for (int64_t j = 0; j < n; ++j) static_cast<uint16_t*>(dst)[j] = to_bf16(src[j]);
}

std::vector<ir::ValueId> kernel_operands(const ir::Function& f, int32_t id) {
  const ir::Node& n = f.nodes[size_t(id)];
  std::vector<ir::ValueId> ops = n.operands;
  const bool attention = n.op == ir::Op::attention || n.op == ir::Op::attention_grad;
  if ((n.op != ir::Op::dot_general && !attention) || f.type(ops[0]).dtype != DType::bf16)
    return ops;
  // o's f32 operand when o is a convert from f32, else -1; not a cross-entropy gradient's (or
  // a reshape of it), which its kernel writes as bf16 (Kernel::write_converted) for the two
  // GEMMs that read it.
  auto source = [&](ir::ValueId o) {
    const ir::Node& c = f.nodes[size_t(o)];
    if (c.op != ir::Op::convert || f.type(c.operands[0]).dtype != DType::f32) return -1;
    const ir::Node* s = &f.nodes[size_t(c.operands[0])];
    if (s->op == ir::Op::reshape) s = &f.nodes[size_t(s->operands[0])];
    if (s->op == ir::Op::result && f.nodes[size_t(s->operands[0])].op == ir::Op::cross_entropy_grad)
      return -1;
    return c.operands[0];
  };
  if (attention) {  // q, k, v: all three, or none
    if (source(ops[0]) >= 0 && source(ops[1]) >= 0 && source(ops[2]) >= 0)
      for (int i = 0; i < 3; ++i) ops[size_t(i)] = source(ops[size_t(i)]);
    return ops;
  }
  for (ir::ValueId& o : ops)
    if (source(o) >= 0) o = source(o);
  return ops;
}

std::unique_ptr<Kernel> make_dot(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  const std::vector<ir::ValueId> reads = kernel_operands(f, id);
  const auto& a = n.attrs;
  const Shape& ls = f.type(n.operands[0]).shape;
  const Shape& rs = f.type(n.operands[1]).shape;
  auto k = std::make_unique<DotKernel>();
  k->dtype = n.type.dtype;
  k->in_dtype = f.type(n.operands[0]).dtype;
  k->out = id;
  k->l.value = reads[0];
  k->r.value = reads[1];
  k->l.f32 = f.type(reads[0]).dtype == DType::f32 && k->in_dtype == DType::bf16;
  k->r.f32 = f.type(reads[1]).dtype == DType::f32 && k->in_dtype == DType::bf16;
  k->B = prod(ls, a.lhs_batching_dimensions);
  k->K = prod(ls, a.lhs_contracting_dimensions);
  k->M = ls.numel() / std::max<int64_t>(k->B * k->K, 1);
  k->N = rs.numel() / std::max<int64_t>(k->B * k->K, 1);
  if (k->B * k->K == 0) {  // empty operand: sizes of the free dims from the result
    k->M = 1;
    k->N = 1;
    int64_t nb = int64_t(a.lhs_batching_dimensions.size());
    int64_t nlf = ls.rank() - nb - int64_t(a.lhs_contracting_dimensions.size());
    for (int64_t i = 0; i < nlf; ++i) k->M *= n.type.shape[nb + i];
    for (int64_t i = nb + nlf; i < n.type.shape.rank(); ++i) k->N *= n.type.shape[i];
  }
  const bool bf16 = k->in_dtype == DType::bf16, half = bf16 || k->in_dtype == DType::f16;
  size_t elem = bf16 ? 2 : half ? 4 : size_of(k->dtype);
  const size_t lelem = k->l.f32 ? 4 : elem, relem = k->r.f32 ? 4 : elem;
  plan_operand(k->l, ls, a.lhs_batching_dimensions, a.lhs_contracting_dimensions, true, lelem);
  plan_operand(k->r, rs, a.rhs_batching_dimensions, a.rhs_contracting_dimensions, false, relem);
  int64_t off = 0;
  auto take = [&](int64_t elems, size_t size) {  // scratch for elems of `size` bytes
    int64_t at = off;
    off += (elems * int64_t(size) + 63) / 64 * 64;
    return at;
  };
  if (half) {
    if (!bf16) {
      k->l.half_off = take(ls.numel(), 4);
      k->r.half_off = take(rs.numel(), 4);
    }
    if (k->dtype != DType::f32) k->out_off = take(n.type.shape.numel(), 4);  // the f32 result
  }
  if (k->l.permute) k->l.perm_off = take(ls.numel(), lelem);
  if (k->r.permute) k->r.perm_off = take(rs.numel(), relem);
  k->own = !bf16 && k->dtype != DType::f64 && k->K <= 512 && k->M * k->N <= (1 << 16) &&
           sgemm_rows_available();
  if (bf16) {
    note_bf16_path();
    k->pack_bytes = (bf16_gemm_pack_bytes(k->l.trans, k->N, k->K) + 63) / 64 * 64;
    k->pack_off = take(0, 1);
    off += k->pack_bytes * std::max(num_threads, 1);
  } else if (k->own) {
    k->pack_bytes = (sgemm_rows_pack_floats(k->l.trans, k->N, k->K) * 4 + 63) / 64 * 64;
    k->pack_off = take(0, 1);
    off += k->pack_bytes * std::max(num_threads, 1);
  }
  k->scratch_bytes = off;
  // Tiles: one per batch element; a single large matrix is split along its longer result dim
  // into 2 pieces from 2^20 multiply-adds, more (up to 8) from 2^24 on, each a multiple of 16
  // rows / columns. Sizes are fixed by the shape alone: OpenBLAS's result bits depend on the
  // split. Each extra tile repacks the other operand, so few tiles; splitting the longer dim
  // splits the larger of the two operands (tlaloc's kernel too: a 64-row GEMM is split by
  // columns, each thread packing its part of B). docs/benchmarks.md has the measurements.
  // bf16: the bits do not depend on the split (gemm_bf16.h), so kPartsPerThread pieces per
  // thread, in multiples of the register tile (12 rows, 32 columns), which the team balances;
  // the operand every piece reads whole is packed once (prepack), not once per piece.
  const int64_t macs = k->B * k->M * k->N * k->K;
  int64_t pieces = 1;
  if (macs >= kParallelMacs)
    pieces = !bf16             ? std::clamp<int64_t>(macs >> 24, 2, 8)
             : num_threads > 1 ? int64_t(num_threads) * kPartsPerThread
                               : 1;
  k->split_rows = k->M >= k->N;
  for (int64_t b = 0; b < k->B; ++b) {
    if (k->B > 1 || pieces == 1) {
      k->tiles.push_back({b, 0, k->M, 0, k->N});
      continue;
    }
    const bool rows = k->split_rows;
    int64_t dim = rows ? k->M : k->N;
    const int64_t unit = !bf16 ? 16 : rows ? 12 : 32;
    int64_t t = std::max(unit, ((dim + pieces - 1) / pieces + unit - 1) / unit * unit);
    for (int64_t s = 0; s < dim; s += t) {
      int64_t e = std::min(dim, s + t);
      k->tiles.push_back(rows ? Tile{b, s, e, 0, k->N} : Tile{b, 0, k->M, s, e});
    }
  }
  if (bf16 && k->tiles.size() > 1 && k->B == 1) {
    k->pre_off = off;
    k->scratch_bytes +=
        (bf16_gemm_prepacked_bytes(k->split_rows ? k->N : k->M, k->K) + 63) / 64 * 64;
  }
  k->run = &DotKernel::exec;
  // A bf16 / f16 result converted to f32: the f32 result, each tile rounded to bf16 / f16 and
  // back in place (the convert's bits), no bf16 / f16 result stored and no pass to widen it.
  k->write_converted = [](Kernel& kk, int32_t from, int32_t to, DType dt) {
    auto& d = static_cast<DotKernel&>(kk);
    if (dt != DType::f32 || from != d.out || d.round_f32 ||
        (d.dtype != DType::bf16 && d.dtype != DType::f16))
      return false;
    d.round_f32 = true;
    d.out = to;
    d.writes = {to};
    d.label += " -> f32";
    return true;
  };
  k->reads = reads;
  k->writes = {id};
  return k;
}

}  // namespace tlaloc::runtime::host
