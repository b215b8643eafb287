// The cross-check's scores (train/cross_check.h) against hand computations: relative L2 errors,
// the update scored by its change, zero norms, NaN / inf, integer tensors, the report's verdict
// and line. (The check itself runs on the pjrt lane: tests/runtime/pjrt/cross_check_test.cpp.)
#include "tlaloc/train/cross_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace tlaloc;
using namespace tlaloc::train;

namespace {

Array f32(std::vector<float> v) { return Array::from(Shape{int64_t(v.size())}, v); }

}  // namespace

TEST(CrossCheckScore, RelativeL2IsTheNormOfTheDifferenceOverTheHostNorm) {
  // host (3, 4): norm 5; device (3, 4.5): difference (0, 0.5), norm 0.5: 0.1.
  TensorScore s = relative_l2("w", f32({3, 4.5f}), f32({3, 4}));
  EXPECT_EQ(s.name, "w");
  EXPECT_DOUBLE_EQ(s.diff_norm, 0.5);
  EXPECT_DOUBLE_EQ(s.ref_norm, 5.0);
  EXPECT_DOUBLE_EQ(s.score, 0.1);
  EXPECT_TRUE(s.problem.empty());
  EXPECT_FALSE(s.passed(1e-2));
  EXPECT_TRUE(s.passed(0.1));  // equal to the threshold passes
  // (1, 2, 2) vs (1, 2, 2) + (2e-3, -1e-3, 2e-3): ‖(2, -1, 2)e-3‖ = 3e-3 over 3.
  s = relative_l2("v", f32({1.002f, 1.999f, 2.002f}), f32({1, 2, 2}));
  EXPECT_NEAR(s.score, 1e-3, 1e-7);
  // Scaled norms: values whose squares overflow f64 still give the right ratio.
  Array big = Array::from(Shape{2}, std::vector<double>{3e200, 4e200});
  Array big2 = Array::from(Shape{2}, std::vector<double>{3e200, 4.5e200});
  EXPECT_NEAR(relative_l2("big", big2, big).score, 0.1, 1e-12);
}

TEST(CrossCheckScore, ZeroHostNormIsFlooredAtFltMin) {
  EXPECT_EQ(relative_l2("z", f32({0, 0}), f32({0, 0})).score, 0.0);
  TensorScore s = relative_l2("z", f32({0, 1e-3f}), f32({0, 0}));
  EXPECT_EQ(s.ref_norm, 0.0);
  EXPECT_DOUBLE_EQ(s.score, double(1e-3f) / std::numeric_limits<float>::min());
  EXPECT_FALSE(s.passed(1e-2));
  EXPECT_TRUE(s.problem.empty());
}

TEST(CrossCheckScore, NanOrInfOnEitherSideIsAProblemNamed) {
  TensorScore s = relative_l2("g", f32({1, NAN}), f32({1, 2}));
  EXPECT_EQ(s.problem, "NaN on the device");
  EXPECT_TRUE(std::isinf(s.score));
  EXPECT_FALSE(s.passed(1e300));
  EXPECT_EQ(relative_l2("g", f32({1, 2}), f32({INFINITY, 2})).problem, "inf on the host");
  // NaN wins over inf in one tensor; both sides named.
  EXPECT_EQ(relative_l2("g", f32({INFINITY, NAN}), f32({-INFINITY, 2})).problem,
            "NaN on the device, inf on the host");
  // NaN in the same place on both sides is still a failure: the check must not be fooled.
  EXPECT_FALSE(relative_l2("g", f32({NAN}), f32({NAN})).passed(1));
}

TEST(CrossCheckScore, IntegerAndBoolTensorsAreComparedExactly) {
  EXPECT_EQ(relative_l2("step", Array::scalar<int32_t>(3), Array::scalar<int32_t>(3)).score, 0.0);
  TensorScore s = relative_l2("step", Array::scalar<int32_t>(4), Array::scalar<int32_t>(3));
  EXPECT_EQ(s.problem, "differs (device 4, host 3)");
  EXPECT_FALSE(s.passed(1));
  Array a = Array::from(Shape{3}, std::vector<int32_t>{1, 2, 3});
  Array b = Array::from(Shape{3}, std::vector<int32_t>{1, 5, 6});
  EXPECT_EQ(relative_l2("n", a, b).problem, "2 of 3 elements differ");
  EXPECT_THROW(relative_l2("n", a, f32({1, 2})), Error);  // shapes differ
}

TEST(CrossCheckScore, TheUpdateIsScoredByItsChange) {
  // before (1, 1), host' (1.1, 0.9): change norm √0.02; device' (1.1, 0.91): difference 0.01.
  TensorScore s = relative_change("p", f32({1.1f, 0.91f}), f32({1.1f, 0.9f}), f32({1, 1}));
  EXPECT_NEAR(s.score, 0.01 / std::sqrt(0.02), 1e-6);
  EXPECT_NEAR(s.ref_norm, std::sqrt(0.02), 1e-7);
  // Scored against host' itself it would be 0.01 / ‖(1.1, 0.9)‖ = 7.0e-3, ten times less (and
  // passing): the smaller the step next to the parameter, the more the change matters.
  EXPECT_NEAR(relative_l2("p", f32({1.1f, 0.91f}), f32({1.1f, 0.9f})).score,
              0.01 / std::sqrt(1.1 * 1.1 + 0.9 * 0.9), 1e-6);
  // No change on the host (e.g. a skipped update): equal is 0, anything else fails.
  EXPECT_EQ(relative_change("p", f32({1, 1}), f32({1, 1}), f32({1, 1})).score, 0.0);
  EXPECT_FALSE(relative_change("p", f32({1, 1.0001f}), f32({1, 1}), f32({1, 1})).passed(1e-2));
  EXPECT_EQ(relative_change("p", f32({NAN, 1}), f32({1, 1}), f32({1, 1})).problem,
            "NaN on the device");
  EXPECT_EQ(relative_change("step", Array::scalar<int32_t>(2), Array::scalar<int32_t>(2),
                            Array::scalar<int32_t>(1))
                .score,
            0.0);
}

TEST(CrossCheckScore, TheReportNamesTheWorstTensorOfEachPart) {
  CrossCheckReport r;
  r.thresholds = cross_check_thresholds(stablehlo::Precision::DEFAULT);
  EXPECT_EQ(r.thresholds.loss, 1e-3);
  EXPECT_EQ(r.thresholds.gradient, 1e-2);
  EXPECT_EQ(r.thresholds.update, 1e-2);
  r.loss = relative_l2("loss", f32({2.0f}), f32({2.0f}));
  r.gradients = {relative_l2("a", f32({3, 4.01f}), f32({3, 4})),  // 2e-3
                 relative_l2("b", f32({1.03f}), f32({1}))};       // 3e-2
  r.update = {relative_l2("a", f32({1}), f32({1}))};
  EXPECT_EQ(r.worst_gradient().name, "b");
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(r.loss_passed());
  EXPECT_FALSE(r.gradients_passed());
  EXPECT_TRUE(r.update_passed());
  EXPECT_EQ(r.summary(),
            "cross-check vs host lane FAILED: loss rel 0.0e+00 (<= 1e-03), gradients max rel L2 "
            "3.0e-02 at b (> 1e-02) FAILED, update max rel L2 0.0e+00 at a (<= 1e-02)");
  r.gradients[1] = relative_l2("b", f32({NAN}), f32({1}));
  EXPECT_EQ(r.worst_gradient().name, "b");
  EXPECT_NE(r.summary().find("gradients max rel L2 inf at b (NaN on the device) FAILED"),
            std::string::npos)
      << r.summary();
  r.gradients.pop_back();
  EXPECT_TRUE(r.passed());
  // Full-f32 dots: tight loss and gradient thresholds; "a" at 2e-3 now fails.
  r.thresholds = cross_check_thresholds(stablehlo::Precision::HIGHEST);
  EXPECT_EQ(r.thresholds.loss, 1e-5);
  EXPECT_EQ(r.thresholds.gradient, 1e-5);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(parse_cross_check_mode("require"), CrossCheckMode::require);
  EXPECT_THROW(parse_cross_check_mode("on"), Error);
}
