#include <gtest/gtest.h>

#include "tlaloc/ir/builder.h"

using namespace tlaloc;
using namespace tlaloc::ir;

TEST(Builder, DotGeneralInfersStableHloOrder) {
  Builder b;
  auto x = b.parameter({DType::f32, {4, 3, 5}});
  auto y = b.parameter({DType::f32, {4, 5, 7}});
  auto z = b.dot_general(x, y, {{0}, {0}, {2}, {1}});
  EXPECT_EQ(b.type(z).shape, (Shape{4, 3, 7}));
}

TEST(Builder, MismatchedShapesNameOpAndShapes) {
  Builder b;
  auto x = b.parameter({DType::f32, {2, 3}});
  auto y = b.parameter({DType::f32, {3, 2}});
  try {
    b.binary(Op::add, x, y);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[2,3]"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[3,2]"), std::string::npos) << m;
  }
}
