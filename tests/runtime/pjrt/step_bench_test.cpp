// The three-lane step benchmark's lanes run on CPU through the executing fake PJRT plugin: lane
// (c) reproduces lane (a)'s losses bitwise (same program, host-lane arithmetic), lane (b) has
// the same first loss (before any update) and then follows the f64 host AdamW reference
// closely; the table names every lane and carries the RESULT line device-check.sh reads; lane
// (c) waits for every step it times.
#include <gtest/gtest.h>

#include <cmath>

#include "fake_client.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/step_bench.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;

namespace {

StepBenchCase small_disc() {
  StepBenchCase c;
  auto keys = random::split(random::key(3), 2);
  c.title = "disc";
  c.make_model = [k = keys[1]] {
    auto m = disc::make_model();
    m->init(k);
    return std::shared_ptr<nn::Module>(m);
  };
  c.loss = disc::mse_loss_fn();
  c.data = disc::data_inputs(32);
  disc::Data d = disc::make_data(keys[0], 32);
  c.resident = {{"x", d.x}, {"y", d.y}};
  c.opt = optim::Adam{.lr = 0.02};
  return c;
}

}  // namespace

TEST(PjrtStepBench, ThreeLanesAgreeOnTheLosses) {
  auto client = tlaloc::testing::fake_client();
  StepBenchCase c = small_disc();
  LaneTiming a = bench_host_lane(c, 3, 0);
  LaneTiming b = bench_pjrt_host_optimizer(c, *client, 3, 0);
  LaneTiming cc = bench_pjrt_in_program(c, *client, 3, 0);
  ASSERT_EQ(a.losses.size(), size_t(kLossSteps));
  ASSERT_EQ(b.losses.size(), size_t(kLossSteps));
  ASSERT_EQ(cc.losses.size(), size_t(kLossSteps));
  EXPECT_EQ(a.ms.size(), 3u);
  EXPECT_EQ(a.losses, cc.losses);
  EXPECT_EQ(a.losses[0], b.losses[0]);
  for (int i = 1; i < kLossSteps; ++i)
    EXPECT_NEAR(b.losses[size_t(i)], a.losses[size_t(i)], 1e-4 * a.losses[size_t(i)]) << i;
  EXPECT_LT(a.losses.back(), a.losses.front());  // it learns
  // Steps are dispatched without waiting: lane (c) waits for each step it times (one wait per
  // step, so the time includes the device's), then reports steps dispatched ahead.
  EXPECT_NE(cc.detail.find("1.00 executions (dispatch)"), std::string::npos) << cc.detail;
  EXPECT_NE(cc.detail.find("1.00 waits for the device"), std::string::npos) << cc.detail;
  EXPECT_NE(b.detail.find("1.00 waits for the device"), std::string::npos) << b.detail;
  EXPECT_NE(cc.detail.find("; dispatched 2 ahead, waited at the end: "), std::string::npos)
      << cc.detail;

  std::string t = lane_table({a, b, cc});
  EXPECT_NE(t.find("(b) / (c):"), std::string::npos) << t;
  EXPECT_NE(t.find("RESULT tlaloc lane_a_median_ms="), std::string::npos) << t;
  EXPECT_NE(t.find(" lane_c_median_ms="), std::string::npos) << t;
  std::string s = lane_table({a, skipped_lane('b', "no plugin"), skipped_lane('c', "no plugin")});
  EXPECT_NE(s.find("skipped: no plugin"), std::string::npos) << s;
  EXPECT_EQ(s.find("lane_c_median_ms"), std::string::npos) << s;
}
