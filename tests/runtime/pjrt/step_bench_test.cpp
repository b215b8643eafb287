// The three-lane step benchmark's lanes run on CPU through the executing fake PJRT plugin: lane
// (c) reproduces lane (a)'s losses bitwise (same program, host-lane arithmetic), lane (b) has
// the same first loss (before any update) and then follows the f64 host AdamW reference
// closely; the table names every lane and carries the RESULT line device-check.sh reads; lane
// (c)'s latency mode waits for every step it times, its throughput mode once per run of steps.
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
  // step, so the time includes the device's), then times runs of steps in flight.
  EXPECT_NE(cc.detail.find("1.00 executions (dispatch)"), std::string::npos) << cc.detail;
  EXPECT_NE(cc.detail.find("1.00 waits for the device"), std::string::npos) << cc.detail;
  EXPECT_NE(b.detail.find("1.00 waits for the device"), std::string::npos) << b.detail;
  EXPECT_NE(cc.throughput_detail.find("per run of 3 steps: "), std::string::npos)
      << cc.throughput_detail;

  std::string t = lane_table({a, b, cc});
  EXPECT_NE(t.find("(b) / (c):"), std::string::npos) << t;
  EXPECT_NE(t.find("RESULT tlaloc lane_a_median_ms="), std::string::npos) << t;
  EXPECT_NE(t.find(" lane_c_median_ms="), std::string::npos) << t;
  for (const char* key :
       {" lane_c_latency_median_ms=", " lane_c_latency_min_ms=", " lane_c_throughput_median_ms=",
        " lane_c_throughput_max_ms=", " lane_c_throughput_steps=3", " lane_c_throughput_repeats=5"})
    EXPECT_NE(t.find(key), std::string::npos) << key << "\n" << t;
  std::string s = lane_table({a, skipped_lane('b', "no plugin"), skipped_lane('c', "no plugin")});
  EXPECT_NE(s.find("skipped: no plugin"), std::string::npos) << s;
  EXPECT_EQ(s.find("lane_c_median_ms"), std::string::npos) << s;
}

// Latency: one wait per timed step. Throughput: the `steps` steps of a run all in flight (the
// fake device holds them until something waits) and one wait per run for all of them. The
// modes run alone leave the other's rows and RESULT keys out.
TEST(PjrtStepBench, LatencyWaitsPerStepThroughputOncePerRun) {
  auto client = tlaloc::testing::fake_client();
  fake_pjrt::Control& k = tlaloc::testing::fake_control();
  StepBenchCase c = small_disc();
  LaneTiming a = bench_host_lane(c, 2, 0);
  k.hold = true;
  k.max_pending = 0;
  LaneTiming both = bench_pjrt_in_program(c, *client, 6, 0, StepBenchMode::both, 3);
  EXPECT_EQ(both.ms.size(), 6u);
  EXPECT_EQ(both.latency_waits, 6);
  ASSERT_EQ(both.throughput_ms.size(), 3u);
  EXPECT_EQ(both.throughput_steps, 6);
  EXPECT_EQ(both.throughput_waits, 3);
  EXPECT_EQ(k.max_pending, 6u);  // a whole run in flight
  EXPECT_EQ(k.pending(), 0u);
  EXPECT_EQ(both.losses, a.losses);

  LaneTiming lat = bench_pjrt_in_program(c, *client, 4, 0, StepBenchMode::latency);
  EXPECT_EQ(lat.ms.size(), 4u);
  EXPECT_EQ(lat.latency_waits, 4);
  EXPECT_TRUE(lat.throughput_ms.empty());
  EXPECT_EQ(lat.throughput_waits, 0);
  std::string t = lane_table({a, skipped_lane('b', "test"), lat});
  EXPECT_NE(t.find(" lane_c_latency_median_ms="), std::string::npos) << t;
  EXPECT_EQ(t.find("lane_c_throughput"), std::string::npos) << t;

  LaneTiming thr = bench_pjrt_in_program(c, *client, 4, 0, StepBenchMode::throughput, 2);
  EXPECT_TRUE(thr.ms.empty());
  EXPECT_EQ(thr.latency_waits, 0);
  EXPECT_EQ(thr.throughput_waits, 2);
  EXPECT_EQ(thr.losses, a.losses);  // recorded in the warm-up all the same
  t = lane_table({a, skipped_lane('b', "test"), thr});
  EXPECT_NE(t.find(" lane_c_throughput_median_ms="), std::string::npos) << t;
  EXPECT_NE(t.find("(a) / (c) throughput: "), std::string::npos) << t;
  EXPECT_EQ(t.find("lane_c_median_ms"), std::string::npos) << t;
  EXPECT_EQ(t.find("lane_c_latency"), std::string::npos) << t;
  k.hold = false;
  EXPECT_EQ(parse_step_bench_mode("throughput"), StepBenchMode::throughput);
  EXPECT_THROW(parse_step_bench_mode("fast"), Error);
}
