// Array sizes: a shape whose byte size (or element count) does not fit in 64 bits is an error
// naming the dtype and shape, not a wrapped size with a tiny allocation.
#include <gtest/gtest.h>

#include "tlaloc/core/array.h"

using namespace tlaloc;

namespace {

constexpr int64_t k2to31 = int64_t(1) << 31, k2to40 = int64_t(1) << 40;

// Expects fn to throw tlaloc::Error whose message contains `needle`.
template <typename F>
void expect_error(F fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Array, ByteSizeOver64BitsIsAnError) {
  // 2^62 elements of 4 bytes: 2^64 bytes, which wrapped to 0 (a 64-byte allocation).
  expect_error([] { Array(DType::f32, Shape{k2to31, k2to31}); }, "f32[2147483648,2147483648]");
  // 2^63 bytes: one more than int64 holds.
  expect_error([] { Array(DType::f64, Shape{int64_t(1) << 60}); }, "f64[1152921504606846976]");
  // The element count itself overflows.
  expect_error(
      [] {
        Array(DType::s32, Shape{k2to40, k2to40});
      },
      "s32[1099511627776,1099511627776]");
  expect_error([] { Array::filled(DType::bf16, Shape{k2to31, k2to31, 4}, 1.0); }, "bf16[");
  expect_error([] { Array(DType::f32, Shape{2, -1}); }, "f32[2,-1] has a negative dimension");
}

TEST(Array, CheckedByteSizes) {
  EXPECT_EQ(checked_nbytes(DType::f32, Shape{2, 3}), 24);
  EXPECT_EQ(checked_nbytes(DType::f64, Shape{}), 8);
  EXPECT_EQ(checked_nbytes(DType::i1, Shape{int64_t(1) << 62}), int64_t(1) << 62);
  EXPECT_EQ(checked_nbytes(DType::f32, Shape{0, k2to40, k2to40}), 0);
  EXPECT_EQ(Array(DType::f32, Shape{0, k2to31}).nbytes(), 0u);
}

}  // namespace
