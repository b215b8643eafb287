// Schedules against hand-computed values of the formulas in schedule.h, and the in-program
// factor (the Trainer's) against those host values bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/core/error.h"
#include "tlaloc/optim/schedule.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::optim {
namespace {

TEST(OptimSchedule, ConstantWithLinearWarmup) {
  Schedule s = parse_schedule("constant", 100, 4);
  EXPECT_DOUBLE_EQ(s.factor(0), 0.25);
  EXPECT_DOUBLE_EQ(s.factor(1), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(3), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(99), 1.0);
  EXPECT_DOUBLE_EQ(parse_schedule("constant", 10).factor(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(1, 0.02), 0.01);
}

TEST(OptimSchedule, Cosine) {
  Schedule s = parse_schedule("cosine", 8);
  EXPECT_DOUBLE_EQ(s.factor(0), 1.0);
  EXPECT_NEAR(s.factor(2), 0.5 * (1 + std::sqrt(0.5)), 1e-15);  // cos(π/4)
  EXPECT_NEAR(s.factor(4), 0.5, 1e-15);
  EXPECT_NEAR(s.factor(8), 0.0, 1e-15);
  EXPECT_NEAR(s.factor(20), 0.0, 1e-15);  // held at the floor past the horizon
  s.min_factor = 0.1;
  EXPECT_NEAR(s.factor(4), 0.1 + 0.9 * 0.5, 1e-15);
  EXPECT_NEAR(s.factor(8), 0.1, 1e-15);
}

TEST(OptimSchedule, WarmupCosine) {
  Schedule s = parse_schedule("warmup-cosine", 10, 2);
  EXPECT_DOUBLE_EQ(s.factor(0), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(1), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(2), 1.0);     // cosine starts: t = 0 of 8
  EXPECT_NEAR(s.factor(6), 0.5, 1e-15);   // t = 4 of 8
  EXPECT_NEAR(s.factor(10), 0.0, 1e-15);  // t = 8 of 8
}

TEST(OptimSchedule, StepDecay) {
  Schedule s = parse_schedule("step:3:0.5", 100);
  EXPECT_DOUBLE_EQ(s.factor(0), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(2), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(3), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(6), 0.25);
  Schedule d = parse_schedule("step", 90);  // default: every total/3 steps, gamma 0.1
  EXPECT_DOUBLE_EQ(d.factor(29), 1.0);
  EXPECT_NEAR(d.factor(30), 0.1, 1e-17);
  EXPECT_NEAR(d.factor(60), 0.01, 1e-17);
}

TEST(OptimSchedule, DescribeNamesWhatTheKindReads) {
  EXPECT_EQ(describe(parse_schedule("constant", 100)), "constant");
  EXPECT_EQ(describe(parse_schedule("constant", 200, 5)), "constant, 5 warm-up steps");
  EXPECT_EQ(describe(parse_schedule("cosine", 2000)), "cosine over 2000 steps");
  Schedule floor = parse_schedule("cosine", 2000);
  floor.min_factor = 0.1;
  EXPECT_EQ(describe(floor), "cosine over 2000 steps to 0.1 of the lr");
  EXPECT_EQ(describe(parse_schedule("warmup-cosine", 2000, 100)),
            "warmup-cosine over 2000 steps, 100 warm-up");
  EXPECT_EQ(describe(parse_schedule("step:666:0.1", 2000)), "step: x0.1 every 666 steps");
  // The horizon of a constant lr changes nothing: the same words.
  EXPECT_EQ(describe(parse_schedule("constant", 10, 2)),
            describe(parse_schedule("constant", 99, 2)));
}

TEST(OptimSchedule, ParseErrors) {
  EXPECT_THROW(parse_schedule("linear", 10), Error);
  EXPECT_THROW(parse_schedule("cosine", 10, 3), Error);
  EXPECT_THROW(parse_schedule("warmup-cosine", 10, 0), Error);
  EXPECT_THROW(parse_schedule("warmup-cosine", 10, 10), Error);
  EXPECT_THROW(parse_schedule("step:x", 10), Error);
  EXPECT_THROW(parse_schedule("step:0", 10), Error);
  EXPECT_THROW(parse_schedule("cosine:3", 10), Error);
  EXPECT_THROW(parse_schedule("constant", 0), Error);
  EXPECT_THROW(parse_schedule("constant", 10).factor(-1), Error);
  try {
    parse_schedule("cosinus", 10);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cosinus"), std::string::npos);
  }
}

// factor_in_program on the host lane, step by step past each horizon, equals factor()'s bits.
TEST(OptimSchedule, InProgramFactorEqualsTheHostsBits) {
  std::vector<Schedule> all = {parse_schedule("constant", 100, 4), parse_schedule("cosine", 8),
                               parse_schedule("warmup-cosine", 30, 7),
                               parse_schedule("step:3:0.5", 20), parse_schedule("cosine", 1)};
  Schedule floor = parse_schedule("cosine", 13);
  floor.min_factor = 0.1;
  all.push_back(floor);
  for (const Schedule& s : all) {
    SCOPED_TRACE(std::string(name(s.kind)) + " over " + std::to_string(s.total_steps));
    ir::Function f = trace::capture(
        [&](std::span<const trace::Tensor> in) -> std::vector<trace::Tensor> {
          return {s.factor_in_program(in[0])};
        },
        {{DType::s32, {}}}, {"step"});
    auto exe = runtime::host::compile(f, {});
    for (int64_t step = 0; step < s.total_steps + 6; ++step) {
      const double got =
          exe->run(std::vector<Array>{Array::scalar<int32_t>(int32_t(step))})[0].at(0);
      EXPECT_EQ(got, s.factor(step)) << "step " << step;
    }
    const double far = exe->run(std::vector<Array>{Array::scalar<int32_t>(1000000)})[0].at(0);
    EXPECT_EQ(far, s.factor(1000000));
  }
}

}  // namespace
}  // namespace tlaloc::optim
