// The scalar formula of each elementwise op (ops.def's last column): one function per op,
// templated on the compute type (float for f32 / bf16 / f16, double, int32_t, uint32_t, uint8_t
// for i1). The host lane's loops (runtime/host/instr_loops.h) and the reference evaluator
// (passes/evaluate.cpp) both apply these, so constant folding and the kernels agree bit for bit.
// Float semantics are IEEE in the compute type (no contraction); integer ops wrap (two's
// complement), division by zero gives -1 (s32) / 0xffffffff (u32) and x % 0 = x, as XLA does;
// shifts by >= 32 give 0; maximum / minimum propagate NaN and order -0 below +0.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tlaloc/core/dtype.h"

namespace tlaloc::ir::scalar {

using tlaloc::bits_f32;
using tlaloc::f32_bits;

constexpr int kF = 1, kS = 2, kU = 4, kB = 8;  // float types, s32, u32, i1

template <class T>
constexpr bool kInt = std::is_integral_v<T>;
template <class T>
T wrap(uint32_t v) {
  return T(v);
}

// ---- vectorizable f32 exp / tanh ----------------------------------------------------------
// glibc's expf / tanhf are scalar calls; these branch-free versions
// vectorize. exp: Cody-Waite reduction x = n ln2 + r and a degree-6 polynomial for e^r (the
// Cephes expf coefficients), scaled by 2^n in two steps so subnormal results round once;
// within 2 ulp. tanh: Cephes tanhf (odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above).
inline float scale2(float y, int32_t n) {  // y * 2^n for n in [-150, 130]
  int32_t n1 = n / 2, n2 = n - n1;
  return y * bits_f32(uint32_t(n1 + 127) << 23) * bits_f32(uint32_t(n2 + 127) << 23);
}
// e^r for r = x - n ln2 in [-ln2 / 2, ln2 / 2] (Cody-Waite reduction, n = round(x / ln2)):
// the Cephes expf polynomial. Returns the unscaled value; n through `n`.
inline float exp_reduced(float x, float& n) {
  float t = x * 1.44269504088896341f;
  n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (|t| < 2^22)
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * z + r + 1.0f;
}
inline float exp_f32(float x) {
  const float hi = 88.72283935546875f, lo = -103.972084045410f;
  float xc = x > hi ? hi : x < lo ? lo : x;
  xc = x == x ? xc : 0.0f;
  float n;
  float y = exp_reduced(xc, n);
  y = scale2(y, int32_t(n));
  y = x > hi ? std::numeric_limits<float>::infinity() : x < lo ? 0.0f : y;
  return x == x ? y : x;
}
inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  // e^2|x| as exp_f32 computes it, for |x| <= 9.1 where none of its range handling applies
  // (one exact scaling by 2^n, n <= 27); above, 1 - 2 / (e^2|x| + 1) rounds to 1 either way.
  float n;
  float e = exp_reduced(2.0f * (ax < 9.1f ? ax : 9.1f), n);
  e = e * bits_f32(uint32_t(int32_t(n) + 127) << 23);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  return ax >= 0.625f ? big : ax == 0 ? x : small;  // keeps the sign of zero; NaN: small
}

// ---- unary ----------------------------------------------------------------------------------
struct Negate {
  static constexpr int types = kF | kS;
  template <class T>
  static T f(T x) {
    if constexpr (kInt<T>)
      return wrap<T>(0u - uint32_t(x));
    else
      return -x;
  }
};
struct Abs {
  static constexpr int types = kF | kS;
  template <class T>
  static T f(T x) {
    if constexpr (kInt<T>)
      return x < 0 ? wrap<T>(0u - uint32_t(x)) : x;
    else
      return std::fabs(x);
  }
};
template <class T>
T fexp(T x) {
  if constexpr (std::is_same_v<T, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}
template <class T>
T ftanh(T x) {
  if constexpr (std::is_same_v<T, float>)
    return tanh_f32(x);
  else
    return std::tanh(x);
}
// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0 so tiny results do not underflow early.
template <class T>
T flogistic(T x) {
  T e = fexp(-std::fabs(x));
  T r = T(1) / (T(1) + e);
  return x >= 0 ? r : e * r;
}
#define TLALOC_FLOAT_UNARY(Name, expr) \
  struct Name {                        \
    static constexpr int types = kF;   \
    template <class T>                 \
    static T f(T x) {                  \
      return expr;                     \
    }                                  \
  };
TLALOC_FLOAT_UNARY(Exp, fexp(x))
TLALOC_FLOAT_UNARY(Log, std::log(x))
TLALOC_FLOAT_UNARY(Log1p, std::log1p(x))
TLALOC_FLOAT_UNARY(Tanh, ftanh(x))
TLALOC_FLOAT_UNARY(Logistic, flogistic(x))
TLALOC_FLOAT_UNARY(Sqrt, std::sqrt(x))
TLALOC_FLOAT_UNARY(Rsqrt, T(1) / std::sqrt(x))
TLALOC_FLOAT_UNARY(Floor, std::floor(x))
TLALOC_FLOAT_UNARY(Cos, std::cos(x))
TLALOC_FLOAT_UNARY(Sin, std::sin(x))
#undef TLALOC_FLOAT_UNARY
struct Sign {
  static constexpr int types = kF | kS;
  template <class T>
  static T f(T x) {
    if constexpr (kInt<T>)
      return T((x > 0) - (x < 0));
    else
      return x > 0 ? T(1) : x < 0 ? T(-1) : x;  // +-0 and NaN pass through
  }
};

// ---- binary ---------------------------------------------------------------------------------
#define TLALOC_ARITH(Name, op)                      \
  struct Name {                                     \
    static constexpr int types = kF | kS | kU;      \
    template <class T>                              \
    static T f(T a, T b) {                          \
      if constexpr (kInt<T>)                        \
        return wrap<T>(uint32_t(a) op uint32_t(b)); \
      else                                          \
        return a op b;                              \
    }                                               \
  };
TLALOC_ARITH(Add, +)
TLALOC_ARITH(Sub, -)
TLALOC_ARITH(Mul, *)
#undef TLALOC_ARITH
struct Div {
  static constexpr int types = kF | kS | kU;
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_same_v<T, int32_t>) {
      if (b == 0) return -1;
      if (a == INT_MIN && b == -1) return INT_MIN;
      return a / b;
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      return b == 0 ? 0xffffffffu : a / b;
    } else {
      return a / b;
    }
  }
};
struct Rem {
  static constexpr int types = kF | kS | kU;
  template <class T>
  static T f(T a, T b) {
    if constexpr (std::is_same_v<T, int32_t>)
      return b == 0 ? a : b == -1 ? 0 : a % b;
    else if constexpr (std::is_same_v<T, uint32_t>)
      return b == 0 ? a : a % b;
    else
      return std::fmod(a, b);
  }
};
struct Max {
  static constexpr int types = kF | kS | kU;
  template <class T>
  static T f(T a, T b) {
    if constexpr (kInt<T>) {
      return a > b ? a : b;
    } else {
      if (a != a || b != b) return a + b;  // NaN
      return (a > b || (a == b && std::signbit(b))) ? a : b;
    }
  }
};
struct Min {
  static constexpr int types = kF | kS | kU;
  template <class T>
  static T f(T a, T b) {
    if constexpr (kInt<T>) {
      return a < b ? a : b;
    } else {
      if (a != a || b != b) return a + b;
      return (a < b || (a == b && std::signbit(a))) ? a : b;
    }
  }
};
struct Pow {
  static constexpr int types = kF;
  template <class T>
  static T f(T a, T b) {
    return std::pow(a, b);
  }
};
#define TLALOC_BITWISE(Name, op)               \
  struct Name {                                \
    static constexpr int types = kS | kU | kB; \
    template <class T>                         \
    static T f(T a, T b) {                     \
      return T(a op b);                        \
    }                                          \
  };
TLALOC_BITWISE(And, &)
TLALOC_BITWISE(Or, |)
TLALOC_BITWISE(Xor, ^)
#undef TLALOC_BITWISE
struct Shl {
  static constexpr int types = kS | kU;
  template <class T>
  static T f(T a, T b) {
    return uint32_t(b) >= 32 ? T(0) : wrap<T>(uint32_t(a) << uint32_t(b));
  }
};
struct Shr {
  static constexpr int types = kS | kU;
  template <class T>
  static T f(T a, T b) {
    return uint32_t(b) >= 32 ? T(0) : wrap<T>(uint32_t(a) >> uint32_t(b));
  }
};

// double -> float rounding to odd, so that a following rounding to bf16 / f16 is exact RNE.
inline float to_float_odd(double x) {
  float f = float(x);
  if (double(f) == x || std::isnan(x) || std::isinf(f)) return f;
  if (std::fabs(double(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  uint32_t u = f32_bits(f) | 1u;
  return bits_f32(u);
}
// convert's value semantics (StableHLO): to i1, x != 0; float to integer, truncated toward zero,
// saturated, NaN to 0; otherwise the C++ conversion (integers wrap, floats round to nearest).
template <class D, class S>
D convert(S x) {
  if constexpr (std::is_same_v<D, uint8_t>) {
    return x != S(0) ? 1 : 0;
  } else if constexpr (!kInt<S> && kInt<D>) {
    if (x != x) return 0;
    constexpr double lo = double(std::numeric_limits<D>::min());
    constexpr double hi = double(std::numeric_limits<D>::max());
    if (double(x) <= lo) return std::numeric_limits<D>::min();
    if (double(x) >= hi) return std::numeric_limits<D>::max();
    return D(x);
  } else {
    return D(x);
  }
}
// An op without a scalar formula (structural ops; convert, compare, select and clamp, whose
// loops are written out by the host lane and the evaluator).
struct None {
  static constexpr int types = kF | kS | kU | kB;
};

}  // namespace tlaloc::ir::scalar
