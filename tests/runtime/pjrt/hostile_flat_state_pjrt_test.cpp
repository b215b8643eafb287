// Flat optimizer state on the pjrt lane (its default), through the executing fake plugin (which
// computes with tlaloc's StableHLO parser and host lane, so the bits must equal the host lane's):
// hostile models against the host lane with per-parameter state (the oracle), and the cross-check
// on flat state naming what a wrong bucket breaks per parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "fake_client.h"
#include "support/error_of.h"
#include "support/mixed_module.h"
#include "support/train_test_util.h"
#include "tlaloc/distributed/communicator.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/cross_check.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;
using trace::Tensor;
namespace disc = tlaloc::recipes::disc;

namespace {

constexpr int64_t kRows = 8;

using train_test::MixedModule;
using train_test::ramp;

// client null: the host lane, per-parameter state (its default); else the pjrt lane, whose
// default is flat (`flat` unset) or as given.
std::unique_ptr<Trainer> mixed_trainer(MixedModule& m, runtime::pjrt::Client* client,
                                       std::optional<bool> flat = std::nullopt,
                                       std::string second_group = "early") {
  TrainerOptions o;
  o.flat_state = flat;
  if (client) {
    o.lane = Lane::pjrt;
    o.client = client;
  }
  return train_test::mixed_trainer(m, o, optim::Adam{.lr = 0.05, .amsgrad = true},
                                   std::move(second_group));
}

TEST(HostileFlatPjrt, MixedDtypeModelEqualsTheHostLanesPerParameterBits) {
  auto client = tlaloc::testing::fake_client();
  MixedModule mh, md, mp;
  auto host = mixed_trainer(mh, nullptr);
  auto dev = mixed_trainer(md, client.get());
  auto dev_each = mixed_trainer(mp, client.get(), false);
  ASSERT_FALSE(host->train_step().flat.has_value());
  ASSERT_TRUE(dev->train_step().flat.has_value());
  ASSERT_FALSE(dev_each->train_step().flat.has_value());
  const auto lh = train_test::step_losses(*host, 5);
  EXPECT_EQ(train_test::step_losses(*dev, 5), lh);
  EXPECT_EQ(train_test::step_losses(*dev_each, 5), lh);
  train_test::expect_same_state(*host, *dev);
  train_test::expect_same_state(*host, *dev_each);
}

// f16 compute with loss scaling on the pjrt lane (flat) against the host lane (per parameter).
TEST(HostileFlatPjrt, F16LossScalingWithSkipsEqualsTheHostLane) {
  auto client = tlaloc::testing::fake_client();
  auto make = [&](nn::Module& model, runtime::pjrt::Client* c) {
    auto keys = random::split(random::key(7), 2);
    model.init(keys[1]);
    TrainerOptions o;
    o.precision = DType::f16;
    o.update.loss_scaling =
        optim::UpdateOptions::LossScaling{.init_scale = 1 << 20, .growth_interval = 2};
    o.update.max_norm = 1.0;
    if (c) {
      o.lane = Lane::pjrt;
      o.client = c;
    }
    auto t = std::make_unique<Trainer>(model, disc::mse_loss_fn(), disc::data_inputs(16),
                                       optim::AdamW{.lr = 0.02, .amsgrad = true}, o);
    disc::Data d = disc::make_data(keys[0], 16);
    t->set_resident("x", d.x);
    t->set_resident("y", d.y);
    return t;
  };
  auto mh = disc::make_model(), md = disc::make_model();
  auto host = make(*mh, nullptr), dev = make(*md, client.get());
  ASSERT_TRUE(dev->train_step().flat.has_value());
  int skipped = 0;
  for (int s = 0; s < 8; ++s) {
    host->step({});
    dev->step({});
    EXPECT_EQ(host->read_last().loss, dev->read_last().loss) << "step " << s;
    EXPECT_EQ(host->last_skipped(), dev->last_skipped()) << "step " << s;
    EXPECT_EQ(host->loss_scale(), dev->loss_scale()) << "step " << s;
    skipped += host->last_skipped();
  }
  EXPECT_GT(skipped, 0);
  train_test::expect_same_state(*host, *dev);
}

const TensorScore& named(const std::vector<TensorScore>& v, const std::string& name) {
  for (const auto& s : v)
    if (s.name == name) return s;
  throw std::runtime_error("no score named " + name);
}

struct Perturb {
  Perturb(std::string program, std::string output, double factor) {
    tlaloc::testing::perturbation = {std::move(program), std::move(output), factor};
  }
  ~Perturb() { tlaloc::testing::perturbation = {}; }
};

// The cross-check of a flat trainer scores the state per parameter, as checkpoints name it; it
// passes on the mixed model, and a wrong bucket on the device is caught and named by a
// parameter's slot of that kind.
TEST(HostileFlatPjrt, CrossCheckOnFlatStateNamesPerParameterSlots) {
  auto client = tlaloc::testing::fake_client();
  MixedModule md;
  auto dev = mixed_trainer(md, client.get());
  dev->step({});
  {
    CrossCheckReport r = cross_check(*dev, {});
    EXPECT_TRUE(r.passed()) << r.summary();
    // 5 parameters, 5 x 3 state slots + step, found_inf, grad_norm.
    ASSERT_EQ(r.update.size(), 5u + 16u + 2u);
    EXPECT_EQ(r.update[5].name, "optimizer.w64.exp_avg");
    EXPECT_EQ(named(r.update, "optimizer.e32.exp_avg").problem, "");
    EXPECT_EQ(named(r.update, "optimizer.step").score, 0.0);
  }
  {
    // Group "late" mixes dtypes: f32 bucket "flat.late" (w32), f64 bucket "flat.late.f64" (w64).
    Perturb wrong("cross_check_update", "flat.late.f64.exp_avg_sq", 1.5);
    CrossCheckReport r = cross_check(*dev, {});
    EXPECT_FALSE(r.update_passed()) << r.summary();
    EXPECT_EQ(r.worst_update().name, "optimizer.w64.exp_avg_sq") << r.summary();
    EXPECT_LE(named(r.update, "optimizer.w32.exp_avg_sq").score, 1e-5);
    EXPECT_LE(named(r.update, "w64").score, 1e-5);  // the parameters are the bucket's p'
  }
  // Nothing changed by the checks: the next steps equal the host lane's.
  MixedModule mh;
  auto host = mixed_trainer(mh, nullptr);
  host->step({});
  EXPECT_EQ(train_test::step_losses(*dev, 2), train_test::step_losses(*host, 2));
  train_test::expect_same_state(*host, *dev);
}

// Rank 0 of two (collectives never run here: only Trainers that are refused are built).
class TwoRankWorld : public distributed::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "test double, 2 ranks"; }
  void all_reduce(void*, int64_t, DType, distributed::Reduction) override {
    throw Error("test double: no collectives");
  }
  void all_gather(const void*, void*, int64_t) override {
    throw Error("test double: no collectives");
  }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
};

// The pjrt lane over two processes with ZeRO-1, flat_state left unset: the user asked for no
// flat state (it is only the pjrt lane's default), so the refusal must be the real one (data
// parallelism runs on the host lane), not "flat optimizer state with ZeRO-1 is not built".
TEST(HostileFlatPjrt, ZeroOnThePjrtLaneIsRefusedForTheLaneNotForADefaultFlatState) {
  auto client = tlaloc::testing::fake_client();
  distributed::set_world(std::make_unique<TwoRankWorld>());
  std::string e, e0;
  {
    auto m = disc::make_model();
    m->init(random::key(1));
    TrainerOptions o;
    o.lane = Lane::pjrt;
    o.client = client.get();
    o.zero = 1;
    e = tlaloc::testing::error_of(
        [&] { Trainer(*m, disc::mse_loss_fn(), disc::data_inputs(kRows), optim::Adam{}, o); });
    o.zero = 0;
    e0 = tlaloc::testing::error_of(
        [&] { Trainer(*m, disc::mse_loss_fn(), disc::data_inputs(kRows), optim::Adam{}, o); });
  }
  distributed::set_world(nullptr);
  EXPECT_NE(e0.find("runs on the host lane"), std::string::npos) << e0;
  EXPECT_NE(e.find("runs on the host lane"), std::string::npos) << e;
  EXPECT_EQ(e.find("flat optimizer state"), std::string::npos) << e;
}

// Group "late.f64" (f32 and f64 parameters) beside group "late" (with an f64 one): two buckets
// both named "flat.late.f64" go through StableHLO; the bits must still be the host lane's.
TEST(HostileFlatPjrt, CollidingBucketNamesStillEqualTheHostLane) {
  auto client = tlaloc::testing::fake_client();
  MixedModule mh, md;
  auto host = mixed_trainer(mh, nullptr, std::nullopt, "late.f64");
  auto dev = mixed_trainer(md, client.get(), std::nullopt, "late.f64");
  EXPECT_EQ(train_test::step_losses(*dev, 4), train_test::step_losses(*host, 4));
  train_test::expect_same_state(*host, *dev);
}

}  // namespace
