#include "tlaloc/random/random.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tlaloc/random/rounding.h"

namespace tlaloc::random {
namespace {

void check_float(const char* fn, DType t) {
  if (!is_floating(t)) fail("random::{}: dtype must be f32, f64, bf16 or f16, got {}", fn, name(t));
}

using detail::round_to;
inline double rnd(DType t, double v) { return round_to(t, v); }

// The next value of dtype t after x in the direction of `toward` (np.nextafter in the dtype).
double next_after(DType t, double x, double toward) {
  if (t == DType::f64) return std::nextafter(x, toward);
  if (t == DType::f32) return double(std::nextafter(float(x), float(toward)));
  if (x == toward || std::isnan(x) || std::isnan(toward)) return x;
  const bool bf = t == DType::bf16;
  uint16_t h = bf ? f32_to_bf16(float(x)) : f32_to_f16(float(x));
  if (x == 0.0)
    h = toward > 0 ? 1 : 0x8001;
  else if ((x < toward) == (x > 0))
    ++h;
  else
    --h;
  return double(bf ? bf16_to_f32(h) : f16_to_f32(h));
}

double smallest_normal(DType t) {
  switch (t) {
    case DType::f64:
      return std::numeric_limits<double>::min();
    case DType::f16:
      return 6.103515625e-05;  // 2^-14
    default:
      return double(std::numeric_limits<float>::min());  // f32 and bf16: 2^-126
  }
}

// Unit draws in [0, 1): the top nmant bits of a width-bit stream, scaled by 2^-nmant. Equal to
// JAX's bitcast((bits >> (width - nmant)) | bits(1.0)) - 1.0 (both are exact).
std::vector<double> unit(Key k, int64_t n, DType t, Mode mode) {
  std::vector<double> u(static_cast<size_t>(n));
  if (t == DType::f32) {
    std::vector<uint32_t> b(static_cast<size_t>(n));
    random_bits32(k, n, b.data(), mode);
    for (size_t i = 0; i < b.size(); ++i) u[i] = double(b[i] >> 9) * 0x1p-23;
    return u;
  }
  const int width = t == DType::f64 ? 64 : t == DType::f16 ? 16 : 8;
  const int nmant = t == DType::f64 ? 52 : t == DType::f16 ? 10 : 7;
  auto b = random_bits(k, width, n, mode);
  const double scale = std::ldexp(1.0, -nmant);
  for (size_t i = 0; i < b.size(); ++i) u[i] = double(b[i] >> (width - nmant)) * scale;
  return u;
}

std::vector<double> uniform_values(Key k, int64_t n, DType t, double minval, double maxval,
                                   Mode mode) {
  auto u = unit(k, n, t, mode);
  const double lo = rnd(t, minval), hi = rnd(t, maxval), span = rnd(t, hi - lo);
  for (double& v : u) v = std::max(lo, rnd(t, rnd(t, v * span) + lo));
  return u;
}

Array to_array(DType t, const Shape& shape, const std::vector<double>& v) {
  return Array::from_doubles(t, shape, v);
}

double erf_inv_in(DType t, double u) {
  return t == DType::f64 ? erf_inv64(u) : rnd(t, double(erf_inv32(float(u))));
}

}  // namespace

float erf_inv32(float x) {
  // Giles' single-precision coefficients, highest degree first (as XLA's ErfInv32).
  static constexpr float kLt5[9] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                    -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                    -0.00417768164f,  0.246640727f,    1.50140941f};
  static constexpr float kGe5[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                    -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                    0.00943887047f,   1.00167406f,     2.83297682f};
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  float w = -std::log1p(-x * x);
  const bool lt = w < 5.0f;
  const float* c = lt ? kLt5 : kGe5;
  w = lt ? w - 2.5f : std::sqrt(w) - 3.0f;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = c[i] + p * w;
  return p * x;
}

double erf_inv64(double x) {
  // Giles' double-precision coefficients, highest degree first (as XLA's ErfInv64).
  static constexpr double kLt625[23] = {
      -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
      1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
      6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
      2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
      1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
      4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
      0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
      0.24015818242558961693,     1.6536545626831027356};
  static constexpr double kLt16[19] = {
      2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
      1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
      2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
      6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
      0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
      -0.0037512085075692412107, 0.005370914553590063617,   1.0052589676941592334,
      3.0838856104922207635};
  static constexpr double kGe16[17] = {
      -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
      -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
      2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
      -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
      7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
      1.0103004648645343977,      4.8499064014085844221};
  if (std::fabs(x) == 1.0) return x * std::numeric_limits<double>::infinity();
  double w = -std::log1p(-x * x);
  const double* c;
  int n;
  if (w < 6.25) {
    c = kLt625, n = 23, w -= 3.125;
  } else if (w < 16.0) {
    c = kLt16, n = 19, w = std::sqrt(w) - 3.25;
  } else {
    c = kGe16, n = 17, w = std::sqrt(w) - 5.0;
  }
  double p = c[0];
  for (int i = 1; i < n; ++i) p = c[i] + p * w;
  return p * x;
}

Array bits(Key k, const Shape& shape, Mode mode) {
  Array out(DType::u32, shape);
  random_bits32(k, out.numel(), out.data<uint32_t>(), mode);
  return out;
}

Array uniform(Key k, const Shape& shape, DType dtype, double minval, double maxval, Mode mode) {
  check_float("uniform", dtype);
  return to_array(dtype, shape, uniform_values(k, shape.numel(), dtype, minval, maxval, mode));
}

Array normal(Key k, const Shape& shape, DType dtype, Mode mode) {
  check_float("normal", dtype);
  const double lo = next_after(dtype, -1.0, 0.0), sqrt2 = rnd(dtype, std::sqrt(2.0));
  auto v = uniform_values(k, shape.numel(), dtype, lo, 1.0, mode);
  for (double& x : v) x = rnd(dtype, sqrt2 * erf_inv_in(dtype, x));
  return to_array(dtype, shape, v);
}

Array truncated_normal(Key k, double lower, double upper, const Shape& shape, DType dtype,
                       Mode mode) {
  check_float("truncated_normal", dtype);
  const double sqrt2 = rnd(dtype, std::sqrt(2.0));
  const double lo = rnd(dtype, lower), hi = rnd(dtype, upper);
  const double a = rnd(dtype, std::erf(rnd(dtype, lo / sqrt2)));
  const double b = rnd(dtype, std::erf(rnd(dtype, hi / sqrt2)));
  const double clip_lo = next_after(dtype, lo, INFINITY),
               clip_hi = next_after(dtype, hi, -INFINITY);
  auto v = uniform_values(k, shape.numel(), dtype, a, b, mode);
  for (double& x : v)
    x = std::min(clip_hi, std::max(clip_lo, rnd(dtype, sqrt2 * erf_inv_in(dtype, x))));
  return to_array(dtype, shape, v);
}

Array bernoulli(Key k, double p, const Shape& shape, Mode mode) {
  const double pf = rnd(DType::f32, p);
  auto u = uniform_values(k, shape.numel(), DType::f32, 0.0, 1.0, mode);
  Array out(DType::i1, shape);
  auto* o = out.data<uint8_t>();
  for (size_t i = 0; i < u.size(); ++i) o[i] = u[i] < pf ? 1 : 0;
  return out;
}

Array randint(Key k, const Shape& shape, int64_t minval, int64_t maxval, DType dtype, Mode mode) {
  if (dtype != DType::s32 && dtype != DType::u32)
    fail("random::randint: dtype must be s32 or u32, got {}", name(dtype));
  const int64_t tmin = dtype == DType::s32 ? std::numeric_limits<int32_t>::min() : 0;
  const int64_t tmax = dtype == DType::s32 ? std::numeric_limits<int32_t>::max()
                                           : std::numeric_limits<uint32_t>::max();
  const bool maxval_out_of_range = maxval > tmax;
  const int64_t lo = std::clamp(minval, tmin, tmax), hi = std::clamp(maxval, tmin, tmax);
  uint32_t span = uint32_t(uint64_t(hi - lo));
  if (hi <= lo)
    span = 1;
  else if (maxval_out_of_range)
    span += 1;  // may wrap to 0: then every remainder below is the identity (XLA's x % 0 = x)
  auto urem = [](uint32_t a, uint32_t m) { return m == 0 ? a : a % m; };
  uint32_t multiplier = urem(65536u, span);
  multiplier = urem(multiplier * multiplier, span);

  auto [k1, k2] = split<2>(k, mode);
  const int64_t n = shape.numel();
  std::vector<uint32_t> higher(static_cast<size_t>(n)), lower(static_cast<size_t>(n));
  random_bits32(k1, n, higher.data(), mode);
  random_bits32(k2, n, lower.data(), mode);
  Array out(dtype, shape);
  auto* o = static_cast<uint32_t*>(out.raw());  // s32 results are the same bits, wrapped
  for (size_t i = 0; i < size_t(n); ++i) {
    uint32_t offset = urem(urem(higher[i], span) * multiplier + urem(lower[i], span), span);
    o[i] = uint32_t(lo) + offset;
  }
  return out;
}

std::vector<int32_t> permutation_indices(Key k, int64_t n, Mode mode) {
  if (n < 0 || n > std::numeric_limits<int32_t>::max())
    fail("random::permutation: n must be in [0, 2^31 - 1], got {}", n);
  std::vector<int32_t> x(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = int32_t(i);
  const int rounds =
      int(std::ceil(3.0 * std::log(double(std::max<int64_t>(1, n))) / std::log(4294967295.0)));
  std::vector<uint32_t> sort_keys(static_cast<size_t>(n));
  std::vector<uint64_t> packed(static_cast<size_t>(n));
  for (int r = 0; r < rounds; ++r) {
    auto [kk, sub] = split<2>(k, mode);
    k = kk;
    random_bits32(sub, n, sort_keys.data(), mode);
    // A stable sort by key: ties keep their current order, via the position in the low bits.
    for (size_t i = 0; i < size_t(n); ++i) packed[i] = (uint64_t(sort_keys[i]) << 32) | i;
    std::sort(packed.begin(), packed.end());
    for (size_t i = 0; i < size_t(n); ++i) next[i] = x[size_t(packed[i] & 0xFFFFFFFFu)];
    x.swap(next);
  }
  return x;
}

Array permutation(Key k, int64_t n, Mode mode) {
  auto idx = permutation_indices(k, n, mode);
  return Array::from<int32_t>({n}, idx);
}

Array permutation(Key k, const Array& x, Mode mode) {
  if (x.shape().rank() == 0)
    fail("random::permutation: x must have at least one axis, got {}", describe(x));
  const int64_t n = x.shape()[0];
  auto idx = permutation_indices(k, n, mode);
  Array out(x.dtype(), x.shape());
  const size_t row = n == 0 ? 0 : x.nbytes() / size_t(n);
  auto* dst = static_cast<uint8_t*>(out.raw());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  for (size_t i = 0; i < size_t(n); ++i)
    std::memcpy(dst + i * row, src + size_t(idx[i]) * row, row);
  return out;
}

Array gumbel(Key k, const Shape& shape, DType dtype, Mode mode) {
  check_float("gumbel", dtype);
  auto v = uniform_values(k, shape.numel(), dtype, smallest_normal(dtype), 1.0, mode);
  for (double& x : v) x = -rnd(dtype, std::log(-rnd(dtype, std::log(x))));
  return to_array(dtype, shape, v);
}

Array categorical(Key k, const Array& logits, Mode mode) {
  check_float("categorical", logits.dtype());
  const Shape& s = logits.shape();
  if (s.rank() == 0 || s[s.rank() - 1] == 0)
    fail("random::categorical: logits need a non-empty last axis, got {}", describe(logits));
  const int64_t n = s[s.rank() - 1], rows = logits.numel() / n;
  const DType t = logits.dtype();
  auto g = gumbel(k, s, t, mode).to_doubles();
  auto l = logits.to_doubles();
  std::vector<int32_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    double best_v = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const size_t i = size_t(r * n + j);
      const double v = rnd(t, g[i] + l[i]);
      if (j == 0 || v > best_v || (std::isnan(v) && !std::isnan(best_v))) best = j, best_v = v;
    }
    out[size_t(r)] = int32_t(best);
  }
  return Array::from<int32_t>(Shape(std::vector<int64_t>(s.dims.begin(), s.dims.end() - 1)), out);
}

}  // namespace tlaloc::random
