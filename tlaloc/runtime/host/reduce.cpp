// reduce (sum / max / min over dimensions). The input is viewed as [A, R, C] (kept, reduced,
// kept); other layouts are first transposed into [kept..., reduced...] in scratch. Summation
// order is fixed by the shapes alone (16 interleaved lanes over chunks of kChunk elements,
// partials combined in chunk order), never by the thread count, so results are bitwise
// reproducible. Inits: sum 0, max -inf (integers: lowest), min +inf (integers: highest).
// max / min propagate NaN. bf16 / f16 accumulate in f32 and round once at the end.
#include "tlaloc/runtime/host/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tlaloc/runtime/host/copy.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {
namespace {

constexpr int64_t kChunk = kReduceChunk;
constexpr int kLanes = kReduceLanes;
constexpr int64_t kStreams = 4;  // chunks a row reduction reads at once (see walk below)

template <class C, ir::ReduceKind K>
struct Acc {
  static C init() {
    if constexpr (K == ir::ReduceKind::sum) return C(0);
    if constexpr (K == ir::ReduceKind::max)
      return std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                  : std::numeric_limits<C>::lowest();
    if constexpr (K == ir::ReduceKind::min)
      return std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity()
                                                  : std::numeric_limits<C>::max();
  }
  static C f(C a, C b) {
    if constexpr (K == ir::ReduceKind::sum) {
      if constexpr (std::is_integral_v<C>)
        return C(uint32_t(a) + uint32_t(b));
      else
        return a + b;
    } else if constexpr (std::is_integral_v<C>) {
      return K == ir::ReduceKind::max ? (a > b ? a : b) : (a < b ? a : b);
    } else {
      if (a != a || b != b) return a + b;
      if constexpr (K == ir::ReduceKind::max)
        return (a > b || (a == b && std::signbit(b))) ? a : b;
      else
        return (a < b || (a == b && std::signbit(a))) ? a : b;
    }
  }
};

// The lane arithmetic shared by the reduce kernel and reductions fused into elementwise loops,
// so both give bitwise the same results: element r of a chunk goes to lane r % kLanes.
template <class Cm, ir::ReduceKind K>
struct Lanes {
  using Ac = Acc<Cm, K>;
  static void reset(void* lanes) {
    auto* l = static_cast<Cm*>(lanes);
    for (int i = 0; i < kLanes; ++i) l[i] = Ac::init();
  }
  // x: len compute-type values starting at a multiple of kLanes within the chunk.
  static void accumulate(void* lanes, const void* xv, int64_t len) {
    auto* lane = static_cast<Cm*>(lanes);
    const Cm* x = static_cast<const Cm*>(xv);
    int64_t r = 0;
    if constexpr (K == ir::ReduceKind::sum && std::is_floating_point_v<Cm>) {
      // The lanes held in 16-byte vector registers across the loop (the lane array in memory
      // made each addition wait on a store and reload): the same additions in the same order.
      using V [[gnu::vector_size(16)]] = Cm;
      constexpr int kPer = int(16 / sizeof(Cm)), kVecs = kLanes / kPer;
      V acc[kVecs];
      std::memcpy(acc, lane, sizeof acc);
      for (; r + kLanes <= len; r += kLanes) {
#pragma GCC unroll 16
        for (int k = 0; k < kVecs; ++k) {
          V t;
          std::memcpy(&t, x + r + k * kPer, sizeof t);
          acc[k] += t;
        }
      }
      std::memcpy(lane, acc, sizeof acc);
    }
    for (; r + kLanes <= len; r += kLanes)
      for (int l = 0; l < kLanes; ++l) lane[l] = Ac::f(lane[l], x[r + l]);
    for (int l = 0; r < len; ++r, ++l) lane[l] = Ac::f(lane[l], x[r]);
  }
  static Cm finish(void* lanes) {
    auto* lane = static_cast<Cm*>(lanes);
    for (int w = kLanes / 2; w >= 1; w /= 2)
      for (int l = 0; l < w; ++l) lane[l] = Ac::f(lane[l], lane[l + w]);
    return lane[0];
  }
  static void finish_chunk(void* lanes, void* partials, int64_t chunk) {
    static_cast<Cm*>(partials)[chunk] = finish(lanes);
  }
  template <DType T>
  static void store(const void* partials, int64_t nchunks, void* out) {
    const Cm* p = static_cast<const Cm*>(partials);
    Cm v = p[0];
    for (int64_t c = 1; c < nchunks; ++c) v = Ac::f(v, p[c]);
    store_elem<T>(out, 0, v);
  }
};

struct ReduceKernel : Kernel {
  int32_t in = -1, out = -1;
  DType dtype;
  ir::ReduceKind kind;
  int64_t A = 1, R = 1, C = 1;
  bool transpose_first = false;
  CopyPlan to_canonical;  // input -> scratch [kept..., reduced...]
  int64_t partial_offset = 0;

  template <DType T, ir::ReduceKind K>
  void go(const Frame& f) const {
    using Cm = Compute<T>;
    using Ac = Acc<Cm, K>;
    const void* src = f.ptr[in];
    if (transpose_first) {
      to_canonical.run(f.scratch, src, 0, 0, f.num_threads);
      src = f.scratch;
    }
    void* dst = f.ptr[out];
    if (C == 1) {
      // Row reductions in fixed chunks; partials of all (a, chunk) pairs, then combine.
      int64_t nch = std::max<int64_t>((R + kChunk - 1) / kChunk, 1);
      auto* part = reinterpret_cast<Cm*>(f.scratch + partial_offset);
      int64_t jobs = A * nch;
      using L = Lanes<Cm, K>;
      constexpr bool direct =
          T == DType::f32 || T == DType::f64 || T == DType::s32 || T == DType::u32;
      auto job = [&](int64_t j) {  // bf16 / f16: converted kLanes at a time
        int64_t a = j / nch, c = j % nch;
        int64_t r0 = c * kChunk, r1 = std::min(R, r0 + kChunk), base = a * R;
        Cm lane[kLanes], buf[kLanes];
        L::reset(lane);
        for (int64_t r = r0; r < r1; r += kLanes) {
          int64_t len = std::min<int64_t>(kLanes, r1 - r);
          for (int64_t i = 0; i < len; ++i) buf[i] = load_elem<T>(src, base + r + i);
          L::accumulate(lane, buf, len);
        }
        part[j] = L::finish(lane);
      };
      // Jobs [j0, j1) of one thread. Stored types read kStreams chunks at once, one from each
      // of kStreams contiguous parts of the range, kPiece elements of each in turn: one
      // sequential stream kept too few reads in flight (a 64 MB f32 sum read ~10 GB/s on the
      // 2-core development VM, four streams ~15 GB/s). Each part is walked last to first, so
      // the range's start is among the last data read and stays cached for a following kernel
      // that reads the input from its start (e.g. an optimizer update after the found-inf
      // check). Every chunk's lanes see the same additions in the same order, and partials
      // combine in chunk order, so results do not depend on the walk.
      auto walk = [&](int64_t j0, int64_t j1) {
        if constexpr (!direct) {
          for (int64_t j = j1; j-- > j0;) job(j);
        } else {
          constexpr int64_t kPiece = 1024 / int64_t(sizeof(Cm));
          const int64_t m = j1 - j0, ns = std::min<int64_t>(kStreams, m);
          int64_t start[kStreams], size[kStreams], longest = 0;
          for (int64_t q = 0; q < ns; ++q) {
            start[q] = j0 + m * q / ns;
            size[q] = j0 + m * (q + 1) / ns - start[q];
            longest = std::max(longest, size[q]);
          }
          for (int64_t i = longest; i-- > 0;) {
            Cm lane[kStreams][kLanes];
            const Cm* x[kStreams];
            int64_t len[kStreams], j[kStreams], live = 0, most = 0;
            for (int64_t q = 0; q < ns; ++q) {
              if (i >= size[q]) continue;
              j[live] = start[q] + i;
              int64_t a = j[live] / nch, c = j[live] % nch, r0 = c * kChunk;
              x[live] = static_cast<const Cm*>(src) + a * R + r0;
              len[live] = std::min(R, r0 + kChunk) - r0;
              most = std::max(most, len[live]);
              L::reset(lane[live++]);
            }
            for (int64_t o = 0; o < most; o += kPiece)
              for (int64_t q = 0; q < live; ++q)
                if (o < len[q]) L::accumulate(lane[q], x[q] + o, std::min(kPiece, len[q] - o));
            for (int64_t q = 0; q < live; ++q) part[j[q]] = L::finish(lane[q]);
          }
        }
      };
      if (jobs * std::min(R, kChunk) >= kParallelElements && f.num_threads > 1 && jobs > 1) {
        parallel(int(std::min<int64_t>(int64_t(f.num_threads) * kPartsPerThread, jobs)),
                 [&](int t, int nt) { walk(jobs * t / nt, jobs * (t + 1) / nt); });
      } else {
        walk(0, jobs);
      }
      for (int64_t a = 0; a < A; ++a) {
        Cm v = part[a * nch];
        for (int64_t c = 1; c < nch; ++c) v = Ac::f(v, part[a * nch + c]);
        store_elem<T>(dst, a, v);
      }
      return;
    }
    // Column reductions: out[a, c] folds in[a, r, c] over r in order; vectorizes over c. Parts
    // split the kept rows a, or, with one such row (a bias gradient: [rows, C] -> [C]), the
    // columns in runs of 16; either way each output folds the same values in the same order.
    auto* acc = reinterpret_cast<Cm*>(f.scratch + partial_offset);
    auto rows = [&](int64_t a0, int64_t a1, int64_t c0, int64_t c1) {
      for (int64_t a = a0; a < a1; ++a) {
        Cm* o = acc + a * C;
        for (int64_t c = c0; c < c1; ++c) o[c] = Ac::init();
        for (int64_t r = 0; r < R; ++r) {
          int64_t base = (a * R + r) * C;
          if constexpr (T == DType::bf16 || T == DType::f16) {
            for (int64_t c = c0; c < c1; ++c) o[c] = Ac::f(o[c], load_elem<T>(src, base + c));
          } else {
            const Cm* x = static_cast<const Cm*>(src) + base;
            for (int64_t c = c0; c < c1; ++c) o[c] = Ac::f(o[c], x[c]);
          }
        }
        for (int64_t c = c0; c < c1; ++c) store_elem<T>(dst, a * C + c, o[c]);
      }
    };
    const bool par = A * R * C >= kParallelElements && f.num_threads > 1;
    const int64_t runs = (C + 15) / 16;
    if (par && A > 1) {
      int nt = int(std::min<int64_t>(int64_t(f.num_threads) * kPartsPerThread, A));
      parallel(nt, [&](int t, int P) { rows(A * t / P, A * (t + 1) / P, 0, C); });
    } else if (par && runs > 1) {
      int nt = int(std::min<int64_t>(f.num_threads, runs));
      parallel(nt, [&](int t, int P) {
        rows(0, A, std::min(C, runs * t / P * 16), std::min(C, runs * (t + 1) / P * 16));
      });
    } else {
      rows(0, A, 0, C);
    }
  }

  static void exec(const Kernel& k, const Frame& f) {
    const auto& r = as<ReduceKernel>(k);
    dispatch(r.dtype, [&]<DType T>() {
      if constexpr (T != DType::i1) {
        switch (r.kind) {
          case ir::ReduceKind::sum:
            return r.go<T, ir::ReduceKind::sum>(f);
          case ir::ReduceKind::max:
            return r.go<T, ir::ReduceKind::max>(f);
          case ir::ReduceKind::min:
            return r.go<T, ir::ReduceKind::min>(f);
        }
      }
    });
  }
};

}  // namespace

FusedReduce fused_reduce(ir::ReduceKind kind, DType dtype) {
  FusedReduce r;
  r.kind = kind;
  r.dtype = dtype;
  dispatch(dtype, [&]<DType T>() {
    if constexpr (T != DType::i1) {
      using Cm = Compute<T>;
      auto set = [&]<ir::ReduceKind K>() {
        using L = Lanes<Cm, K>;
        r.reset = &L::reset;
        r.accumulate = &L::accumulate;
        r.finish_chunk = &L::finish_chunk;
        r.store = &L::template store<T>;
      };
      if (kind == ir::ReduceKind::sum) set.template operator()<ir::ReduceKind::sum>();
      if (kind == ir::ReduceKind::max) set.template operator()<ir::ReduceKind::max>();
      if (kind == ir::ReduceKind::min) set.template operator()<ir::ReduceKind::min>();
    }
  });
  if (!r.accumulate) fail("host runtime: no fused reduce for {}", name(dtype));
  return r;
}

std::unique_ptr<Kernel> make_reduce(const ir::Function& f, int32_t id) {
  const ir::Node& n = f.nodes[size_t(id)];
  const Shape& s = f.type(n.operands[0]).shape;
  auto k = std::make_unique<ReduceKernel>();
  k->in = n.operands[0];
  k->out = id;
  k->dtype = n.type.dtype;
  k->kind = n.attrs.reduce_kind;
  std::vector<bool> red(size_t(s.rank()), false);
  for (int64_t d : n.attrs.dimensions) red[size_t(d)] = true;
  // Segments of non-trivial dims: kept / reduced runs.
  std::vector<std::pair<bool, int64_t>> seg;
  for (int64_t d = 0; d < s.rank(); ++d) {
    if (s[d] == 1) continue;
    if (!seg.empty() && seg.back().first == red[size_t(d)])
      seg.back().second *= s[d];
    else
      seg.push_back({red[size_t(d)], s[d]});
  }
  int nred = 0;
  for (auto& sg : seg) nred += sg.first;
  size_t csize = size_of(k->dtype) <= 4 ? 4 : 8;  // accumulator bytes (bf16/f16 in f32)
  int64_t canon_bytes = 0;
  if (nred <= 1) {
    bool seen = false;
    for (auto& [r, sz] : seg) {
      if (r) {
        k->R = sz;
        seen = true;
      } else {
        (seen ? k->C : k->A) *= sz;
      }
    }
  } else {
    // Transpose into [kept..., reduced...].
    std::vector<int64_t> kept, reduced;
    for (int64_t d = 0; d < s.rank(); ++d) (red[size_t(d)] ? reduced : kept).push_back(d);
    auto st = s.strides();
    std::vector<int64_t> order = kept;
    order.insert(order.end(), reduced.begin(), reduced.end());
    Shape box;
    std::vector<int64_t> src_strides;
    for (int64_t d : order) {
      box.dims.push_back(s[d]);
      src_strides.push_back(st[size_t(d)]);
    }
    CopyPlan p;
    p.dims = box.dims;
    p.dst_strides = box.strides();
    p.src_strides = src_strides;
    p.elem_size = size_of(k->dtype);
    p.collapse();
    k->to_canonical = p;
    k->transpose_first = true;
    for (int64_t d : kept) k->A *= s[d];
    for (int64_t d : reduced) k->R *= s[d];
    canon_bytes = (s.numel() * int64_t(size_of(k->dtype)) + 63) / 64 * 64;
  }
  int64_t nch = std::max<int64_t>((k->R + kChunk - 1) / kChunk, 1);
  int64_t partial = k->C == 1 ? k->A * nch : k->A * k->C;
  k->partial_offset = canon_bytes;
  k->scratch_bytes = canon_bytes + partial * int64_t(csize);
  k->run = &ReduceKernel::exec;
  k->reads = {k->in};
  k->writes = {id};
  return k;
}

}  // namespace tlaloc::runtime::host
