// The host lane's inline f16 conversions (kernel.h: to_f16 / from_f16, branch-free so that
// loops vectorize) against core's reference ones (dtype.h: f32_to_f16 / f16_to_f32): every f16
// pattern, and f32 patterns covering every exponent and sign with the low 13 bits (the ones f16
// rounds away) at each rounding case, plus random patterns; bit for bit, NaNs included.
#include <gtest/gtest.h>

#include <cstdint>

#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::host_test {
namespace {

using runtime::host::from_f16;
using runtime::host::to_f16;

uint32_t bits(float f) { return ir::scalar::f32_bits(f); }
float from_bits(uint32_t u) { return ir::scalar::bits_f32(u); }

TEST(HostHalf, FromF16EqualsCoreOnEveryPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h)
    ASSERT_EQ(bits(from_f16(uint16_t(h))), bits(f16_to_f32(uint16_t(h)))) << std::hex << h;
}

TEST(HostHalf, ToF16EqualsCoreOnEveryRoundingCase) {
  const uint32_t low[] = {0, 1, 0x7ff, 0xfff, 0x1000, 0x1001, 0x1555, 0x1fff};
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t l : low) {
      const uint32_t u = (high << 13) | l;
      ASSERT_EQ(to_f16(from_bits(u)), f32_to_f16(from_bits(u))) << std::hex << u;
    }
  uint64_t z = 88172645463325252ull;
  for (int i = 0; i < (1 << 22); ++i) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    const uint32_t u = uint32_t(z);
    ASSERT_EQ(to_f16(from_bits(u)), f32_to_f16(from_bits(u))) << std::hex << u;
  }
}

}  // namespace
}  // namespace tlaloc::host_test
