#include "tlaloc/runtime/host/copy.h"

#include <algorithm>
#include <cstring>

#include "tlaloc/runtime/host/kernel.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {

void CopyPlan::collapse() {
  std::vector<int64_t> d, ds, ss;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!d.empty() && ds.back() == dst_strides[i] * dims[i] &&
        ss.back() == src_strides[i] * dims[i]) {
      d.back() *= dims[i];
      ds.back() = dst_strides[i];
      ss.back() = src_strides[i];
    } else {
      d.push_back(dims[i]);
      ds.push_back(dst_strides[i]);
      ss.push_back(src_strides[i]);
    }
  }
  dims = std::move(d);
  dst_strides = std::move(ds);
  src_strides = std::move(ss);
}

int64_t CopyPlan::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

namespace {

// n elements d[i · ds] = s[i · ss].
template <class E>
void copy_run(E* d, const E* s, int64_t n, int64_t ds, int64_t ss) {
  if (ds == 1 && ss == 1) {
    std::memcpy(d, s, size_t(n) * sizeof(E));
  } else if (ds == 1 && ss == 0) {  // a fill (e.g. the zeros a scatter-add starts from)
    std::fill_n(d, n, *s);
  } else if (ss == 0) {
    E v = *s;
    for (int64_t i = 0; i < n; ++i) d[i * ds] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
  }
}

template <class E>
void copy_rows(const CopyPlan& p, E* dst, const E* src, int64_t r0, int64_t r1) {
  // Rows are all coordinates of dims[0..rank-1); the last dim is the inner loop.
  const int rank = int(p.dims.size());
  const int64_t inner = p.dims[size_t(rank - 1)];
  const int64_t ds = p.dst_strides[size_t(rank - 1)], ss = p.src_strides[size_t(rank - 1)];
  int64_t coord[32] = {};
  int64_t rem = r0, doff = 0, soff = 0;
  for (int k = rank - 2; k >= 0; --k) {
    coord[k] = rem % p.dims[size_t(k)];
    rem /= p.dims[size_t(k)];
    doff += coord[k] * p.dst_strides[size_t(k)];
    soff += coord[k] * p.src_strides[size_t(k)];
  }
  for (int64_t r = r0; r < r1; ++r) {
    copy_run(dst + doff, src + soff, inner, ds, ss);
    for (int k = rank - 2; k >= 0; --k) {
      doff += p.dst_strides[size_t(k)];
      soff += p.src_strides[size_t(k)];
      if (++coord[k] < p.dims[size_t(k)]) break;
      doff -= coord[k] * p.dst_strides[size_t(k)];
      soff -= coord[k] * p.src_strides[size_t(k)];
      coord[k] = 0;
    }
  }
}

template <class E>
void copy_typed(const CopyPlan& p, void* dst, const void* src, int64_t dshift, int64_t sshift,
                int num_threads) {
  E* d = static_cast<E*>(dst) + p.dst_offset + dshift;
  const E* s = static_cast<const E*>(src) + p.src_offset + sshift;
  if (p.dims.empty()) {
    *d = *s;
    return;
  }
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < p.dims.size(); ++k) rows *= p.dims[k];
  if (p.numel() >= kParallelElements && num_threads > 1 && rows == 1) {
    // One long row (a flat copy or fill): split it into pieces.
    const int64_t n = p.dims[0], ds = p.dst_strides[0], ss = p.src_strides[0];
    parallel(num_threads * kPartsPerThread, [&](int t, int T) {
      const int64_t i0 = n * t / T, i1 = n * (t + 1) / T;
      copy_run(d + i0 * ds, s + i0 * ss, i1 - i0, ds, ss);
    });
  } else if (p.numel() >= kParallelElements && num_threads > 1 && rows > 1) {
    int nt = int(std::min<int64_t>(int64_t(num_threads) * kPartsPerThread, rows));
    parallel(nt, [&](int t, int T) { copy_rows(p, d, s, rows * t / T, rows * (t + 1) / T); });
  } else {
    copy_rows(p, d, s, 0, rows);
  }
}

}  // namespace

void CopyPlan::run(void* dst, const void* src, int64_t dshift, int64_t sshift,
                   int num_threads) const {
  if (numel() == 0) return;
  switch (elem_size) {
    case 1:
      return copy_typed<uint8_t>(*this, dst, src, dshift, sshift, num_threads);
    case 2:
      return copy_typed<uint16_t>(*this, dst, src, dshift, sshift, num_threads);
    case 4:
      return copy_typed<uint32_t>(*this, dst, src, dshift, sshift, num_threads);
    default:
      return copy_typed<uint64_t>(*this, dst, src, dshift, sshift, num_threads);
  }
}

void fill(void* dst, int64_t n, const void* value, size_t elem_size) {
  auto go = [&](auto tag) {
    using E = decltype(tag);
    E v;
    std::memcpy(&v, value, sizeof(E));
    E* d = static_cast<E*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  };
  switch (elem_size) {
    case 1:
      return go(uint8_t{});
    case 2:
      return go(uint16_t{});
    case 4:
      return go(uint32_t{});
    default:
      return go(uint64_t{});
  }
}

}  // namespace tlaloc::runtime::host
