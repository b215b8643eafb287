// In-program bits / uniform / bernoulli / split / fold_in, compiled by the host lane, equal the
// host functions' values bit for bit (several shapes, odd sizes, both modes).
#include <gtest/gtest.h>

#include "support/stablehlo_roundtrip.h"
#include "tlaloc/random/program.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using namespace tlaloc::random;

namespace {

ir::Function draws(const Shape& s, Mode m) {
  return trace::capture(
      [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
        return {bits(in[0], s, m),
                uniform(in[0], s, 0, 1, m),
                uniform(in[0], s, -2.5, 3, m),
                bernoulli(in[0], 0.3, s, m),
                split(in[0], 3, m),
                fold_in(in[0], in[1]),
                bits(fold_in(in[0], in[1]), s, m)};
      },
      {{DType::u32, {2}}, {DType::s32, {}}}, {"key", "step"});
}

}  // namespace

TEST(ProgramRandom, EqualsHostBitsForSeveralShapes) {
  const Shape shapes[] = {Shape{},     Shape{1},       Shape{2},    Shape{7},
                          Shape{3, 5}, Shape{5, 3, 3}, Shape{1000}, Shape{17, 31}};
  for (Mode m : {Mode::partitionable, Mode::legacy}) {
    for (const Shape& s : shapes) {
      // Fused and unfused kernels must agree with the host functions alike.
      for (bool fuse : {true, false}) {
        auto exe = runtime::host::compile(draws(s, m), {.num_threads = 0, .fuse = fuse});
        for (uint64_t seed : {0ull, 1701ull, 0x123456789abcdefull}) {
          const Key k = key(seed);
          const int32_t step = 12345;
          std::vector<Array> in{key_data(k), Array::scalar<int32_t>(step)};
          auto out = exe->run(in);
          const std::string where = to_string(s) +
                                    (m == Mode::legacy ? " legacy" : " partitionable") +
                                    (fuse ? " fused" : " unfused");
          EXPECT_TRUE(out[0].bitwise_equal(bits(k, s, m))) << where;
          EXPECT_TRUE(out[1].bitwise_equal(uniform(k, s, DType::f32, 0, 1, m))) << where;
          EXPECT_TRUE(out[2].bitwise_equal(uniform(k, s, DType::f32, -2.5, 3, m))) << where;
          EXPECT_TRUE(out[3].bitwise_equal(bernoulli(k, 0.3, s, m))) << where;
          std::vector<uint32_t> want_keys;
          for (Key kk : split(k, 3, m)) want_keys.push_back(kk.hi), want_keys.push_back(kk.lo);
          EXPECT_EQ(out[4].to_vector<uint32_t>(), want_keys) << where;
          const Key folded = fold_in(k, uint32_t(step));
          EXPECT_TRUE(out[5].bitwise_equal(key_data(folded))) << where;
          EXPECT_TRUE(out[6].bitwise_equal(bits(folded, s, m))) << where;
        }
      }
    }
  }
}

// The same programs as StableHLO text (what the pjrt lane compiles): emit -> parse -> run equals
// the captured function bit for bit.
// randint's bounds: a small span, one of 2^31 - 1 (every remainder), a negative minimum, the
// whole s32 range (maxval past s32: span 2^32 wraps to 0) and u32's, an empty range.
TEST(ProgramRandom, RandintEqualsHostBits) {
  struct Case {
    int64_t lo, hi;
    DType t;
  };
  const Case cases[] = {{0, 4081, DType::s32},         {0, 2147483647, DType::s32},
                        {-50, 7, DType::s32},          {-2147483648LL, 4294967296LL, DType::s32},
                        {0, 4294967296LL, DType::u32}, {5, 5, DType::s32},
                        {3, 1000, DType::u32}};
  for (Mode m : {Mode::partitionable, Mode::legacy}) {
    for (const Case& c : cases) {
      for (const Shape& s : {Shape{}, Shape{4}, Shape{3, 7}}) {
        auto f = trace::capture(
            [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
              return {randint(fold_in(in[0], in[1]), s, c.lo, c.hi, c.t, m)};
            },
            {{DType::u32, {2}}, {DType::s32, {}}}, {"key", "step"});
        auto exe = runtime::host::compile(f, {});
        for (int32_t step : {0, 1, 77}) {
          const Key k = key(20260921);
          auto out = exe->run(std::vector<Array>{key_data(k), Array::scalar<int32_t>(step)});
          EXPECT_TRUE(
              out[0].bitwise_equal(randint(fold_in(k, uint32_t(step)), s, c.lo, c.hi, c.t, m)))
              << c.lo << " " << c.hi << " " << name(c.t) << " " << to_string(s) << " step " << step;
        }
      }
    }
  }
}

TEST(ProgramRandom, StableHloRoundTrip) {
  for (Mode m : {Mode::partitionable, Mode::legacy}) {
    for (const Shape& s : {Shape{7}, Shape{4, 3}}) {
      std::vector<Array> in{key_data(key(99)), Array::scalar<int32_t>(3)};
      std::string text = tlaloc::testing::expect_stablehlo_roundtrip(draws(s, m), in);
      EXPECT_NE(text.find("shift_right_logical"), std::string::npos);
    }
  }
}
