// Element types. Names follow StableHLO's where it has one (f32, bf16, i1); integers are
// spelled s32 / u32 as in XLA's HLO (StableHLO prints them as i32 / ui32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tlaloc {

enum class DType : uint8_t { f32, f64, bf16, f16, s32, u32, i1 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16,
                                       DType::s32, DType::u32, DType::i1};

// Bytes per element (i1 is stored as one byte, 0 or 1).
size_t size_of(DType t);
// "f32", "f64", "bf16", "f16", "s32", "u32", "i1".
std::string_view name(DType t);
// Parses a name produced by name(); throws tlaloc::Error otherwise.
DType dtype_from_name(std::string_view s);
bool is_floating(DType t);  // f32 f64 bf16 f16
bool is_integer(DType t);   // s32 u32
bool is_signed_integer(DType t);

// IEEE-754 binary16 and bfloat16 conversions; f32 -> 16-bit rounds to nearest even, NaN stays
// NaN, overflow goes to inf (as numpy / torch do).
// The bits of an f32 and back.
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// C++ type for a dtype, for kernels and typed accessors.
template <DType T>
struct CType;
template <>
struct CType<DType::f32> {
  using type = float;
};
template <>
struct CType<DType::f64> {
  using type = double;
};
template <>
struct CType<DType::bf16> {
  using type = uint16_t;
};
template <>
struct CType<DType::f16> {
  using type = uint16_t;
};
template <>
struct CType<DType::s32> {
  using type = int32_t;
};
template <>
struct CType<DType::u32> {
  using type = uint32_t;
};
template <>
struct CType<DType::i1> {
  using type = uint8_t;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::s32;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::u32;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::i1;
}

}  // namespace tlaloc
