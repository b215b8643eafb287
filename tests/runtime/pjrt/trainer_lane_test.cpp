// The Trainer on the pjrt lane, run on CPU through the executing fake PJRT plugin (which
// computes with tlaloc's StableHLO parser and host lane): the disc demo's steps must equal the
// host lane bitwise, the state must stay resident (uploads counted by the client), and one
// compiled executable serves the run.
#include <gtest/gtest.h>

#include "disc_run.h"
#include "fake_client.h"
#include "nn/llama_util.h"
#include "support/train_test_util.h"
#include "tlaloc/nn/lora.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/train/cross_check.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;

namespace {

constexpr int64_t kPoints = tlaloc::testing::kDiscPoints;
using tlaloc::testing::DiscRun;

}  // namespace

TEST(PjrtTrainerLane, DiscStepsEqualTheHostLaneBitwiseWithResidentState) {
  auto client = tlaloc::testing::fake_client();
  DiscRun host(nullptr), dev(client.get());
  EXPECT_EQ(host.trainer->lane(), Lane::host);
  EXPECT_EQ(dev.trainer->lane(), Lane::pjrt);
  EXPECT_EQ(client->cache_size(), 1u);  // the step, compiled once
  // The pjrt lane keeps flat optimizer state by default, the host lane per parameter: the
  // checks below compare them bit for bit, per parameter.
  EXPECT_TRUE(dev.trainer->train_step().flat.has_value());
  EXPECT_FALSE(host.trainer->train_step().flat.has_value());

  // Nothing goes up per step and nothing comes back: the cosine schedule is computed in the
  // program from the step's index, so the base lr and the grad scale (1) go up once.
  size_t scalars = dev.trainer->train_step().scalar_inputs(std::vector<double>{0.02}, 1.0).size();
  ASSERT_EQ(scalars, 2u);  // lr, grad_scale
  int64_t up0 = client->uploads(), down0 = client->downloads();
  for (int s = 0; s < 3; ++s) {
    host.trainer->step({});
    dev.trainer->step({});
  }
  EXPECT_EQ(client->uploads() - up0, 2);
  EXPECT_TRUE(dev.trainer->train_step().has_schedule_step);
  EXPECT_EQ(client->downloads() - down0, 0);
  auto times = client->call_times();
  EXPECT_EQ(times.uploads, client->uploads());
  EXPECT_GE(times.executes, 3);
  EXPECT_GE(times.execute_ms, 0.0);

  for (int s = 3; s < 6; ++s) {
    host.trainer->step({});
    dev.trainer->step({});
    StepReport h = host.trainer->read_last(), d = dev.trainer->read_last();
    EXPECT_EQ(h.loss, d.loss) << "step " << s;
    EXPECT_EQ(h.found_inf, d.found_inf);
  }
  EXPECT_EQ(client->cache_size(), 1u);
  EXPECT_EQ(dev.trainer->optimizer_step(), 6);
  train_test::expect_same_state(*host.trainer, *dev.trainer);
  // Hand check of one number: the loss is an MSE against +-1 labels, so it is positive.
  EXPECT_GT(dev.trainer->read_last().loss, 0.0);
}

TEST(PjrtTrainerLane, LoadStateEvalAndSyncMoveDataToAndFromTheDevice) {
  auto client = tlaloc::testing::fake_client();
  DiscRun host(nullptr), dev(client.get());
  for (int s = 0; s < 2; ++s) host.trainer->step({});
  // The host lane's state after 2 steps, loaded into the device trainer.
  std::vector<Array> params, state;
  for (auto& [n, a] : host.trainer->named_parameters()) params.push_back(a);
  for (auto& [n, a] : host.trainer->optimizer_state()) state.push_back(a);
  dev.trainer->load_state(params, state, 2);
  EXPECT_EQ(dev.trainer->optimizer_step(), 2);
  train_test::expect_same_state(*host.trainer, *dev.trainer);
  host.trainer->step({});
  dev.trainer->step({});
  EXPECT_EQ(host.trainer->read_last().loss, dev.trainer->read_last().loss);

  int he = host.trainer->add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{20, 2}}}});
  int de = dev.trainer->add_eval(disc::predict_fn(), {{"x", {DType::f32, Shape{20, 2}}}});
  Batch grid{{"x", disc::grid_points(4, 5)}}, grid2 = grid;
  Array hp = host.trainer->run_eval(he, grid)[0];
  Array dp = dev.trainer->run_eval(de, grid2)[0];
  EXPECT_TRUE(hp.bitwise_equal(dp));
  // The caller's data is lent, never consumed: left in place on both lanes.
  EXPECT_TRUE(grid[0].second.bitwise_equal(disc::grid_points(4, 5)));
  EXPECT_TRUE(grid2[0].second.bitwise_equal(disc::grid_points(4, 5)));
  // The parameters were lent to the evaluation and are still resident: training goes on.
  host.trainer->step({});
  dev.trainer->step({});
  EXPECT_EQ(host.trainer->read_last().loss, dev.trainer->read_last().loss);
  dev.trainer->sync_to_model();
  auto named = dev.model->named_parameters();
  auto hn = host.trainer->named_parameters();
  for (size_t i = 0; i < named.size(); ++i)
    EXPECT_TRUE(named[i].param->value.bitwise_equal(hn[i].second)) << hn[i].first;
  // A bad load changes nothing and names the array.
  params[0] = Array(DType::f32, Shape{3});
  EXPECT_THROW(dev.trainer->load_state(params, state, 2), Error);
  EXPECT_EQ(dev.trainer->optimizer_step(), 4);
}

TEST(PjrtTrainerLane, ChooseLaneSaysWhichAndWhyInOneLine) {
  EXPECT_EQ(parse_lane("auto"), Lane::automatic);
  EXPECT_THROW(parse_lane("gpu"), Error);
  EXPECT_EQ(choose_lane(Lane::host).lane, Lane::host);
  runtime::pjrt::Status st = runtime::pjrt::probe();
  LaneChoice a = choose_lane(Lane::automatic);
  EXPECT_EQ(a.line.find('\n'), std::string::npos);
  if (st.ok) {
    EXPECT_EQ(a.lane, Lane::pjrt);
    EXPECT_EQ(choose_lane(Lane::pjrt).lane, Lane::pjrt);
  } else {
    EXPECT_EQ(a.lane, Lane::host);
    EXPECT_EQ(a.line, "lane: host (pjrt unavailable: " + st.reason + ")");
    try {
      choose_lane(Lane::pjrt);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "--lane pjrt: pjrt unavailable: " + st.reason);
    }
  }
}

// --precision highest and --deterministic reach the plugin: the program still runs (and equals
// the host lane through the fake), and the compile options carry the XLA flag.
TEST(PjrtTrainerLane, PrecisionAndDeterministicOptionsReachTheCompiler) {
  auto client = tlaloc::testing::fake_client();
  auto keys = random::split(random::key(7), 2);
  auto model = disc::make_model();
  model->init(keys[1]);
  TrainerOptions o;
  o.lane = Lane::pjrt;
  o.client = client.get();
  o.pjrt.emit.precision = stablehlo::Precision::HIGHEST;
  o.pjrt.compile.overrides.push_back({"xla_gpu_deterministic_ops", true});
  Trainer t(*model, disc::mse_loss_fn(), disc::data_inputs(kPoints), optim::Adam{.lr = 0.02}, o);
  runtime::pjrt::CompileOptions want;
  want.overrides.push_back({"xla_gpu_deterministic_ops", true});
  EXPECT_EQ(tlaloc::testing::last_options, runtime::pjrt::serialize(want));
  DiscRun host(nullptr);
  disc::Data d = disc::make_data(keys[0], kPoints);
  t.set_resident("x", d.x);
  t.set_resident("y", d.y);
  CrossCheckReport c = cross_check(t, {});  // full-f32 dots: the tight thresholds
  EXPECT_EQ(c.thresholds.gradient, 1e-5);
  EXPECT_TRUE(c.passed()) << c.summary();
  t.step({});
  host.trainer->step({});
  EXPECT_EQ(t.read_last().loss, host.trainer->read_last().loss);
}

// LoRA on the pjrt lane: the frozen base weights go up once and stay (per step only the
// scalars that change go up: none with a constant lr after the first step), the step agrees with
// the host lane's (the device runs the StableHLO decompositions of the fused composites, so
// rounding differs) and the base comes back bitwise as loaded.
TEST(PjrtTrainerLane, LoraBaseStaysResidentAndUnchanged) {
  auto client = tlaloc::testing::fake_client();
  nn::models::LlamaConfig cfg = llama_test::tiny(4, 2, false);
  const Array ids = llama_test::tokens(2, 12, 61);
  LossFn loss = [](nn::Module& m, const Inputs& d) {
    auto& lm = static_cast<nn::models::LlamaForCausalLM&>(m);
    return std::vector<trace::Tensor>{nn::next_token_loss(lm.forward(d["ids"]), d["ids"])};
  };
  auto make = [&](runtime::pjrt::Client* c, nn::models::LlamaForCausalLM& m) {
    llama_test::randomize(m, 3);
    nn::add_lora(m, {.r = 2, .lora_alpha = 4}, random::key(5));
    TrainerOptions o;
    if (c) {
      o.lane = Lane::pjrt;
      o.client = c;
    }
    auto t = std::make_unique<Trainer>(
        m, loss, std::vector<DataInput>{{"ids", {DType::s32, ids.shape()}, true}},
        optim::AdamW{.lr = 1e-2}, o);
    t->set_resident("ids", ids);
    return t;
  };
  nn::models::LlamaForCausalLM hm(cfg), dm(cfg);
  auto host = make(nullptr, hm);
  auto dev = make(client.get(), dm);
  const auto base = host->frozen_parameters();
  dev->step({});
  host->step({});
  const int64_t up0 = client->uploads();
  for (int s = 1; s < 5; ++s) {
    dev->step({});
    host->step({});
    const double h = host->read_last().loss, d = dev->read_last().loss;
    EXPECT_NEAR(d, h, 1e-5 * std::abs(h)) << "step " << s;
  }
  EXPECT_EQ(client->uploads(), up0);  // nothing went up after the first step
  const auto frozen = dev->frozen_parameters();
  ASSERT_EQ(frozen.size(), base.size());
  for (size_t i = 0; i < base.size(); ++i)
    EXPECT_TRUE(frozen[i].second.bitwise_equal(base[i].second)) << base[i].first;
  auto hp = host->named_parameters(), dp = dev->named_parameters();
  for (size_t i = 0; i < hp.size(); ++i)
    EXPECT_LE(llama_test::rel_err(dp[i].second, hp[i].second), 1e-4) << hp[i].first;
}
