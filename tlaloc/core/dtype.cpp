#include "tlaloc/core/dtype.h"

#include <cstring>

#include "tlaloc/core/error.h"

namespace tlaloc {

size_t size_of(DType t) {
  switch (t) {
    case DType::f64:
      return 8;
    case DType::f32:
    case DType::s32:
    case DType::u32:
      return 4;
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::i1:
      return 1;
  }
  return 0;
}

std::string_view name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::s32:
      return "s32";
    case DType::u32:
      return "u32";
    case DType::i1:
      return "i1";
  }
  return "?";
}

DType dtype_from_name(std::string_view s) {
  for (DType t : kAllDTypes)
    if (name(t) == s) return t;
  fail("unknown dtype '{}' (expected f32, f64, bf16, f16, s32, u32 or i1)", s);
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}
bool is_integer(DType t) { return t == DType::s32 || t == DType::u32; }
bool is_signed_integer(DType t) { return t == DType::s32; }

float bf16_to_f32(uint16_t h) { return bits_f32(uint32_t(h) << 16); }

uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return uint16_t((u + rounding) >> 16);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);
    // subnormal: value = man * 2^-24
    float v = float(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // subnormal or zero in f16: round a / 2^-24 to nearest even.
    float v = bits_f32(a) * 16777216.0f;  // exact scaling by 2^24
    uint32_t m = uint32_t(v);
    float rem = v - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t exp = (a >> 23) - 112;
  uint32_t man = a & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into exponent: fine
  return uint16_t(sign | h);
}

}  // namespace tlaloc
