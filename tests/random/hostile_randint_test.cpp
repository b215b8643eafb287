// Hostile bounds for the in-program randint against the host's random::randint, bit for bit:
// empty ranges, negative bounds, spans near 2^31 and 2^32 (remainders by divisors past 2^31),
// bounds past the dtype's range, u32, shapes with no elements, both modes, fused and unfused
// host kernels, the evaluator (passes::interpret) and the StableHLO text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "support/stablehlo_roundtrip.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/random/program.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using namespace tlaloc::random;

namespace {

struct Bounds {
  int64_t lo, hi;
  DType t;
};

constexpr int64_t k31 = int64_t(1) << 31, k32 = int64_t(1) << 32;

const Bounds kBounds[] = {
    {0, 1, DType::s32},               // span 1
    {7, 3, DType::s32},               // maxval < minval
    {-5, -5, DType::s32},             // empty, negative
    {-100, -3, DType::s32},           // both negative
    {-k31, k31 - 1, DType::s32},      // span 2^32 - 1 (no wrap)
    {-k31, k31, DType::s32},          // maxval past s32: span 2^32 wraps to 0
    {-k31 - 5, k31 + 5, DType::s32},  // both past s32
    {-1, k31 - 1, DType::s32},        // span 2^31
    {1, k31, DType::s32},             // maxval just past: span 2^31
    {k31 + 3, k31 + 9, DType::s32},   // both past the top: empty after the clamp
    {-k32, -k31 - 1, DType::s32},     // both below the bottom: empty after the clamp
    {0, k32 - 1, DType::u32},         // span 2^32 - 1
    {1, k32, DType::u32},             // maxval past u32: span 2^32 - 1
    {0, k32, DType::u32},             // span 2^32 wraps to 0
    {k31, k32 - 1, DType::u32},       // lo past 2^31
    {k31 + 12345, k31 + 99999, DType::u32},
    {-7, 3, DType::u32},  // negative minval clamped to 0
    {3000000000LL, 3000000001LL, DType::u32},
    {0, 3000000000LL, DType::u32},     // divisor 3e9 > 2^31: an unsigned remainder
    {-k31, 1000000000LL, DType::s32},  // span 3147483648 > 2^31
    {0, 65536, DType::s32},            // multiplier 0
    {0, 65537, DType::s32},
    {0, 4097, DType::u32},
};

ir::Function draw(const Bounds& c, const Shape& s, Mode m) {
  return trace::capture(
      [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {randint(fold_in(in[0], in[1]), s, c.lo, c.hi, c.t, m)};
      },
      {{DType::u32, {2}}, {DType::s32, {}}}, {"key", "step"});
}

std::string where(const Bounds& c, const Shape& s, Mode m) {
  return std::to_string(c.lo) + " " + std::to_string(c.hi) + " " + std::string(name(c.t)) + " " +
         to_string(s) + (m == Mode::legacy ? " legacy" : " partitionable");
}

}  // namespace

TEST(HostileRandint, EdgeBoundsEqualTheHostBits) {
  const Shape shapes[] = {Shape{}, Shape{0}, Shape{3, 0}, Shape{5}, Shape{2, 9}, Shape{1001}};
  for (Mode m : {Mode::partitionable, Mode::legacy}) {
    for (const Bounds& c : kBounds) {
      for (const Shape& s : shapes) {
        ir::Function f = draw(c, s, m);
        for (bool fuse : {true, false}) {
          auto exe = runtime::host::compile(f, {.num_threads = 0, .fuse = fuse});
          for (int32_t step : {0, 1, -1, 2147483647}) {
            const Key k = key(0xdeadbeefcafeULL);
            std::vector<Array> in{key_data(k), Array::scalar<int32_t>(step)};
            const Array want = randint(fold_in(k, uint32_t(step)), s, c.lo, c.hi, c.t, m);
            const Array got = exe->run(in)[0];
            EXPECT_TRUE(got.bitwise_equal(want))
                << where(c, s, m) << (fuse ? " fused" : " unfused") << " step " << step;
            // The evaluator (constant folding's) too.
            EXPECT_TRUE(passes::interpret(f, in)[0].bitwise_equal(want))
                << where(c, s, m) << " interpret step " << step;
          }
        }
      }
    }
  }
}

// Every value in range, for the bounds whose range is not the whole type.
TEST(HostileRandint, ValuesStayInRange) {
  for (const Bounds& c : kBounds) {
    const Array a = randint(key(5), Shape{4096}, c.lo, c.hi, c.t);
    const int64_t tmin = c.t == DType::s32 ? -k31 : 0, tmax = c.t == DType::s32 ? k31 - 1 : k32 - 1;
    const int64_t lo = std::clamp(c.lo, tmin, tmax), hi = std::clamp(c.hi, tmin, tmax);
    for (double v : a.to_doubles()) {
      if (hi <= lo) {
        ASSERT_EQ(int64_t(v), lo) << c.lo << " " << c.hi;
      } else if (c.hi > tmax) {
        ASSERT_TRUE(int64_t(v) >= lo && int64_t(v) <= tmax) << c.lo << " " << c.hi << " " << v;
      } else {
        ASSERT_TRUE(int64_t(v) >= lo && int64_t(v) < hi) << c.lo << " " << c.hi << " " << v;
      }
    }
  }
}

TEST(HostileRandint, StableHloRoundTrip) {
  for (Mode m : {Mode::partitionable, Mode::legacy}) {
    for (const Bounds& c : kBounds) {
      for (const Shape& s : {Shape{0}, Shape{6}}) {
        SCOPED_TRACE(where(c, s, m));
        std::vector<Array> in{key_data(key(77)), Array::scalar<int32_t>(5)};
        tlaloc::testing::expect_stablehlo_roundtrip(draw(c, s, m), in);
      }
    }
  }
}
