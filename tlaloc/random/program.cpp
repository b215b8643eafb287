#include "tlaloc/random/program.h"

#include <algorithm>
#include <limits>

namespace tlaloc::random {
namespace {

Tensor u32(const Tensor& like, uint32_t v) {
  ir::Builder& b = like.builder();
  return {&b, b.scalar(DType::u32, double(v))};
}

Tensor iota_u32(const Tensor& like, int64_t n) {
  ir::Builder& b = like.builder();
  return {&b, b.iota({DType::u32, Shape{n}}, 0)};
}

Tensor zeros_u32(const Tensor& like, int64_t n) {
  return trace::broadcast_to(u32(like, 0), Shape{n});
}

Tensor rotl(const Tensor& x, int r) {
  return (x << u32(x, uint32_t(r))) | trace::shift_right_logical(x, u32(x, uint32_t(32 - r)));
}

void check_key(const Tensor& key, const char* fn) {
  if (key.dtype() != DType::u32 || key.shape() != Shape{2})
    fail("random::{} (in-program): key must be u32[2], got {}", fn, to_string(key.type()));
}

// The key's words as u32 scalars.
std::pair<Tensor, Tensor> words(const Tensor& key, const char* fn) {
  check_key(key, fn);
  return {trace::reshape(trace::slice(key, 0, 0, 1), {}),
          trace::reshape(trace::slice(key, 0, 1, 2), {})};
}

int64_t checked_numel(const Shape& shape, const char* fn) {
  const int64_t n = shape.numel();
  if (n >= (int64_t(1) << 32))
    fail("random::{} (in-program): {} elements, at most 2^32 - 1 are supported", fn, n);
  return n;
}

// Legacy threefry_2x32(key, iota(m)) (key.h): halves of the padded counters, hashed pairwise.
Tensor legacy_words(const Tensor& k0, const Tensor& k1, int64_t m) {
  const int64_t h = (m + 1) / 2;
  Tensor x0 = iota_u32(k0, h);
  Tensor x1;
  if (m % 2 == 0) {
    x1 = iota_u32(k0, h) + u32(k0, uint32_t(h));
  } else if (h == 1) {
    x1 = zeros_u32(k0, 1);  // the padding count
  } else {
    x1 = trace::concat({iota_u32(k0, h - 1) + u32(k0, uint32_t(h)), zeros_u32(k0, 1)}, 0);
  }
  auto [y0, y1] = threefry2x32(k0, k1, x0, x1);
  Tensor all = trace::concat({y0, y1}, 0);
  return m % 2 == 0 ? all : trace::slice(all, 0, 0, m);
}

Tensor reshaped(const Tensor& x, const Shape& shape) {
  return trace::reshape(x, std::vector<int64_t>(shape.dims.begin(), shape.dims.end()));
}

}  // namespace

Tensor key_constant(Key k) { return trace::constant(key_data(k)); }

std::pair<Tensor, Tensor> threefry2x32(const Tensor& k0, const Tensor& k1, const Tensor& x0_in,
                                       const Tensor& x1_in) {
  for (const Tensor* t : {&k0, &k1, &x0_in, &x1_in})
    if (t->dtype() != DType::u32)
      fail("random::threefry2x32 (in-program): operands must be u32, got {}", to_string(t->type()));
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const Tensor ks[3] = {k0, k1, k0 ^ k1 ^ u32(k0, 0x1BD11BDAu)};
  Tensor x0 = x0_in + ks[0];
  Tensor x1 = x1_in + ks[1];
  for (int g = 0; g < 5; ++g) {
    for (int r : kRot[g % 2]) {
      x0 = x0 + x1;
      x1 = rotl(x1, r);
      x1 = x1 ^ x0;
    }
    x0 = x0 + ks[(g + 1) % 3];
    x1 = x1 + (ks[(g + 2) % 3] + u32(k0, uint32_t(g + 1)));
  }
  return {x0, x1};
}

Tensor fold_in(const Tensor& key, const Tensor& data) {
  auto [k0, k1] = words(key, "fold_in");
  if (data.rank() != 0 || (data.dtype() != DType::u32 && data.dtype() != DType::s32))
    fail("random::fold_in (in-program): data must be a u32 or s32 scalar, got {}",
         to_string(data.type()));
  Tensor d = data.dtype() == DType::u32 ? data : trace::astype(data, DType::u32);
  auto [y0, y1] = threefry2x32(k0, k1, u32(key, 0), d);
  return trace::concat({trace::reshape(y0, {1}), trace::reshape(y1, {1})}, 0);
}

Tensor split(const Tensor& key, int64_t n, Mode mode) {
  auto [k0, k1] = words(key, "split");
  if (n <= 0) fail("random::split (in-program): number of keys must be >= 1, got {}", n);
  checked_numel(Shape{2 * n}, "split");
  if (mode == Mode::legacy) return trace::reshape(legacy_words(k0, k1, 2 * n), {n, 2});
  auto [y0, y1] = threefry2x32(k0, k1, zeros_u32(key, n), iota_u32(key, n));
  return trace::concat({trace::reshape(y0, {n, 1}), trace::reshape(y1, {n, 1})}, 1);
}

Tensor bits(const Tensor& key, const Shape& shape, Mode mode) {
  auto [k0, k1] = words(key, "bits");
  const int64_t n = checked_numel(shape, "bits");
  if (n == 0) return trace::broadcast_to(u32(key, 0), shape);
  if (mode == Mode::legacy) return reshaped(legacy_words(k0, k1, n), shape);
  auto [y0, y1] = threefry2x32(k0, k1, zeros_u32(key, n), iota_u32(key, n));
  return reshaped(y0 ^ y1, shape);
}

Tensor uniform(const Tensor& key, const Shape& shape, double minval, double maxval, Mode mode) {
  // As random.h in f32: (bits >> 9) * 2^-23 is exact, then x * (max - min) + min, max(min, .).
  Tensor u =
      trace::astype(trace::shift_right_logical(bits(key, shape, mode), u32(key, 9)), DType::f32) *
      0x1p-23;
  const float lo = float(minval), hi = float(maxval), span = hi - lo;
  if (lo == 0.0f && span == 1.0f) return u;  // the scaling below would be exact identities
  Tensor lo_t{&key.builder(), key.builder().scalar(DType::f32, double(lo))};
  return trace::maximum(lo_t, u * double(span) + double(lo));
}

Tensor bernoulli(const Tensor& key, double p, const Shape& shape, Mode mode) {
  return uniform(key, shape, 0.0, 1.0, mode) < double(float(p));
}

Tensor randint(const Tensor& key, const Shape& shape, int64_t minval, int64_t maxval, DType dtype,
               Mode mode) {
  check_key(key, "randint");
  if (dtype != DType::s32 && dtype != DType::u32)
    fail("random::randint (in-program): dtype must be s32 or u32, got {}", name(dtype));
  // The span and multiplier are fixed by the bounds: computed here as random.cpp does.
  const int64_t tmin = dtype == DType::s32 ? std::numeric_limits<int32_t>::min() : 0;
  const int64_t tmax = dtype == DType::s32 ? std::numeric_limits<int32_t>::max()
                                           : std::numeric_limits<uint32_t>::max();
  const int64_t lo = std::clamp(minval, tmin, tmax), hi = std::clamp(maxval, tmin, tmax);
  uint32_t span = uint32_t(uint64_t(hi - lo));
  if (hi <= lo)
    span = 1;
  else if (maxval > tmax)
    span += 1;  // may wrap to 0: every remainder is then the identity
  const uint32_t m1 = span == 0 ? 65536u : 65536u % span;
  const uint32_t multiplier = span == 0 ? m1 * m1 : (m1 * m1) % span;
  auto urem = [&](const Tensor& x) { return span == 0 ? x : trace::remainder(x, u32(x, span)); };
  const Tensor keys = split(key, 2, mode);
  auto row = [&](int64_t i) { return trace::reshape(trace::slice(keys, 0, i, i + 1), {2}); };
  const Tensor higher = bits(row(0), shape, mode), lower = bits(row(1), shape, mode);
  const Tensor offset = urem(urem(higher) * u32(higher, multiplier) + urem(lower));
  const Tensor u = offset + u32(offset, uint32_t(lo));
  return dtype == DType::u32 ? u : trace::astype(u, DType::s32);  // wraps, as the host
}

}  // namespace tlaloc::random
