// Element literals of dense<...> constants (moved out of parse.cpp): decimal or hex bits.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "tlaloc/stablehlo/parse_ast.h"

namespace tlaloc::stablehlo::detail {

void decode_element(const std::string& s, DType t, unsigned char* dst, Loc l) {
  bool hex = s.size() > 2 && s.substr(0, 2) == "0x";
  auto bad = [&] { error_at(l, fmt::format("'{}' is not a valid {} element", s, name(t))); };
  if (t == DType::i1) {
    if (s != "true" && s != "false") bad();
    *dst = s == "true";
    return;
  }
  if (s == "true" || s == "false") bad();
  char* end = nullptr;
  if (hex) {
    size_t digits = s.size() - 2;
    if (!is_floating(t) || digits != 2 * size_of(t)) bad();
    uint64_t bits = std::strtoull(s.c_str() + 2, &end, 16);
    std::memcpy(dst, &bits, size_of(t));  // little-endian host
    return;
  }
  switch (t) {
    case DType::f32: {
      float v = std::strtof(s.c_str(), &end);
      std::memcpy(dst, &v, 4);
      break;
    }
    case DType::f64: {
      double v = std::strtod(s.c_str(), &end);
      std::memcpy(dst, &v, 8);
      break;
    }
    case DType::bf16:
    case DType::f16: {
      float v = std::strtof(s.c_str(), &end);
      uint16_t h = t == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(dst, &h, 2);
      break;
    }
    case DType::s32:
    case DType::u32: {
      if (s.find_first_of(".eE") != std::string::npos) bad();
      long long v = std::strtoll(s.c_str(), &end, 10);
      bool ok = t == DType::s32 ? (v >= INT32_MIN && v <= INT32_MAX) : (v >= 0 && v <= UINT32_MAX);
      if (!ok) error_at(l, fmt::format("{} out of range for {}", s, name(t)));
      if (t == DType::s32) {
        int32_t x = int32_t(v);
        std::memcpy(dst, &x, 4);
      } else {
        uint32_t x = uint32_t(v);
        std::memcpy(dst, &x, 4);
      }
      break;
    }
    case DType::i1:
      break;
  }
  if (end == nullptr || *end != '\0') bad();
}

}  // namespace tlaloc::stablehlo::detail
