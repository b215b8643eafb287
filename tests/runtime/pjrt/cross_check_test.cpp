// train::cross_check on the executing fake PJRT plugin (the device computes through tlaloc's
// StableHLO parser and host lane, running the composites' decompositions): a real step passes
// far below the thresholds without changing the trainer; the fake made wrong on purpose
// (tlaloc::testing::perturbation) is caught by the part it breaks, naming the tensor; fit prints
// the line, warns or stops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fake_client.h"
#include "nn/llama_util.h"
#include "support/captured_output.h"
#include "tlaloc/nn/lora.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/cross_check.h"
#include "tlaloc/train/fit.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;

namespace {

constexpr int64_t kPoints = 64;

// The disc MLP (Linear 2-16-16-1, Adam) on the fake device, its data resident.
std::unique_ptr<Trainer> disc_trainer(nn::Module& model, runtime::pjrt::Client* client,
                                      TrainerOptions o = {}) {
  auto keys = random::split(random::key(7), 2);
  model.init(keys[1]);
  o.lane = client ? Lane::pjrt : Lane::host;
  o.client = client;
  auto t = std::make_unique<Trainer>(model, disc::mse_loss_fn(), disc::data_inputs(kPoints),
                                     optim::Adam{.lr = 0.02}, o);
  disc::Data d = disc::make_data(keys[0], kPoints);
  t->set_resident("x", d.x);
  t->set_resident("y", d.y);
  return t;
}

// Sets the fake's perturbation for the scope.
struct Perturb {
  Perturb(std::string program, std::string output, double factor) {
    tlaloc::testing::perturbation = {std::move(program), std::move(output), factor};
  }
  ~Perturb() { tlaloc::testing::perturbation = {}; }
};

const TensorScore& named(const std::vector<TensorScore>& v, const std::string& name) {
  for (const auto& s : v)
    if (s.name == name) return s;
  throw std::runtime_error("no score named " + name);
}

using Output = tlaloc::testing::CapturedOutput;

}  // namespace

TEST(PjrtCrossCheck, DiscPassesFarBelowTheThresholdsWithoutChangingTheTrainer) {
  auto client = tlaloc::testing::fake_client();
  auto hm = disc::make_model(), dm = disc::make_model();
  auto host = disc_trainer(*hm, nullptr), dev = disc_trainer(*dm, client.get());
  host->step({});
  dev->step({});  // from a state with non-zero moments
  const auto params = dev->named_parameters(), state = dev->optimizer_state();

  CrossCheckReport r = cross_check(*dev, {});
  std::printf("%s\n", r.summary().c_str());
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_EQ(r.thresholds.loss, 1e-3);
  EXPECT_EQ(r.thresholds.gradient, 1e-2);
  EXPECT_EQ(r.thresholds.update, 1e-2);
  EXPECT_LE(r.loss.score, 1e-6);
  ASSERT_EQ(r.gradients.size(), 6u);
  EXPECT_EQ(r.gradients[0].name, "0.weight");
  EXPECT_GT(r.gradients[0].ref_norm, 0.0);
  EXPECT_LE(r.worst_gradient().score, 1e-5) << r.worst_gradient().name;
  // 6 parameters, 13 state slots (2 moments each and the step), found_inf.
  ASSERT_EQ(r.update.size(), 6u + 13u + 1u);
  EXPECT_EQ(r.update[6].name, "optimizer.0.weight.exp_avg");
  EXPECT_EQ(named(r.update, "optimizer.step").score, 0.0);
  EXPECT_EQ(named(r.update, "found_inf").score, 0.0);
  EXPECT_GT(named(r.update, "2.weight").ref_norm, 0.0);  // the change is what is scored
  EXPECT_LE(r.worst_update().score, 1e-5) << r.worst_update().name;
  EXPECT_NE(r.summary().find("cross-check vs host lane passed: loss rel "), std::string::npos);

  // Nothing changed: the state is as before and the next steps equal the host lane's bitwise.
  EXPECT_EQ(dev->steps_taken(), 1);
  EXPECT_EQ(dev->optimizer_step(), 1);
  auto p2 = dev->named_parameters(), s2 = dev->optimizer_state();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(p2[i].second.bitwise_equal(params[i].second)) << params[i].first;
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(s2[i].second.bitwise_equal(state[i].second)) << state[i].first;
  for (int s = 0; s < 2; ++s) {
    host->step({});
    dev->step({});
    EXPECT_EQ(host->read_last().loss, dev->read_last().loss);
  }

  EXPECT_THROW(cross_check(*host, {}), Error);                           // the host lane
  EXPECT_THROW(cross_check(*dev, {{"w", Array::scalar(1.0f)}}), Error);  // disc takes none
}

TEST(PjrtCrossCheck, AGradientFivePercentOffIsNamedAndFails) {
  auto client = tlaloc::testing::fake_client();
  auto m = disc::make_model();
  auto t = disc_trainer(*m, client.get());
  Perturb wrong("cross_check_gradient", "2.weight", 1.05);
  CrossCheckReport r = cross_check(*t, {});
  std::printf("%s\n", r.summary().c_str());
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(r.loss_passed());
  EXPECT_FALSE(r.gradients_passed());
  EXPECT_EQ(r.worst_gradient().name, "2.weight");
  EXPECT_NEAR(r.worst_gradient().score, 0.05, 1e-6);  // ‖0.05 g‖ / ‖g‖
  EXPECT_LE(named(r.gradients, "0.weight").score, 1e-5);
  EXPECT_TRUE(r.update_passed()) << r.summary();  // fed the host lane's gradients
  const std::string line = r.summary();
  EXPECT_NE(line.find("cross-check vs host lane FAILED"), std::string::npos) << line;
  EXPECT_NE(line.find("at 2.weight (> 1e-02) FAILED"), std::string::npos) << line;
}

TEST(PjrtCrossCheck, AWrongUpdateIsCaughtByTheUpdatePart) {
  auto client = tlaloc::testing::fake_client();
  auto m = disc::make_model();
  auto t = disc_trainer(*m, client.get());
  // p' 1% off (the old check's max|diff| / max|p'| read that as 1e-2): a tenth of Adam's change
  // of the parameter here, which is what the update part divides by.
  Perturb wrong("cross_check_update", "2.weight", 1.01);
  CrossCheckReport r = cross_check(*t, {});
  std::printf("%s\n", r.summary().c_str());
  EXPECT_TRUE(r.loss_passed());
  EXPECT_TRUE(r.gradients_passed()) << r.summary();
  EXPECT_FALSE(r.update_passed());
  EXPECT_EQ(r.worst_update().name, "2.weight");
  EXPECT_GT(r.worst_update().score, 0.1);
  EXPECT_NEAR(r.worst_update().score, r.worst_update().diff_norm / r.worst_update().ref_norm,
              1e-12);
}

TEST(PjrtCrossCheck, NonFiniteDeviceGradientIsAProblemNamed) {
  auto client = tlaloc::testing::fake_client();
  auto m = disc::make_model();
  auto t = disc_trainer(*m, client.get());
  Perturb wrong("cross_check_gradient", "0.bias", INFINITY);  // inf, or NaN where g is 0
  CrossCheckReport r = cross_check(*t, {});
  EXPECT_FALSE(r.gradients_passed());
  EXPECT_EQ(r.worst_gradient().name, "0.bias");
  EXPECT_TRUE(std::isinf(r.worst_gradient().score));
  EXPECT_NE(r.worst_gradient().problem.find("on the device"), std::string::npos);
  EXPECT_NE(r.summary().find("max rel L2 inf at 0.bias ("), std::string::npos) << r.summary();
  std::printf("%s\n", r.summary().c_str());
}

// f16 compute with dynamic loss scaling (the gradient program's loss seed is the scale from the
// optimizer state) and clipping (grad_norm scored).
TEST(PjrtCrossCheck, LossScalingAndClippingPass) {
  auto client = tlaloc::testing::fake_client();
  auto m = disc::make_model();
  TrainerOptions o;
  o.precision = DType::f16;
  o.update.max_norm = 0.5;
  auto t = disc_trainer(*m, client.get(), o);
  ASSERT_TRUE(t->loss_scaling());
  t->step({});
  CrossCheckReport r = cross_check(*t, {});
  std::printf("%s\n", r.summary().c_str());
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_EQ(named(r.update, "grad_norm").problem, "");
  EXPECT_EQ(named(r.update, "scaler.scale").score, 0.0);
  // The gradients are the scaled ones (S = 65536 by default): their norm says so.
  EXPECT_GT(r.gradients[0].ref_norm, 100.0);
}

// A real model: the tiny Llama with LoRA (frozen base weights; lora_B starts at zero, so each
// lora_A's gradient is exactly zero on both lanes and scores 0).
TEST(PjrtCrossCheck, TinyLlamaWithLoraPasses) {
  auto client = tlaloc::testing::fake_client();
  nn::models::LlamaForCausalLM model(llama_test::tiny(4, 2, false));
  llama_test::randomize(model, 3);
  nn::add_lora(model, {.r = 2, .lora_alpha = 4}, random::key(5));
  const Array ids = llama_test::tokens(2, 12, 61);
  LossFn loss = [](nn::Module& m, const Inputs& d) {
    auto& lm = static_cast<nn::models::LlamaForCausalLM&>(m);
    return std::vector<trace::Tensor>{nn::next_token_loss(lm.forward(d["ids"]), d["ids"])};
  };
  TrainerOptions o;
  o.lane = Lane::pjrt;
  o.client = client.get();
  Trainer t(model, loss, {{"ids", {DType::s32, ids.shape()}}}, optim::AdamW{.lr = 1e-2}, o);
  CrossCheckReport r = cross_check(t, {{"ids", ids}});
  std::printf("%s\n", r.summary().c_str());
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_LE(r.worst_gradient().score, 1e-4) << r.worst_gradient().name;
  EXPECT_LE(r.worst_update().score, 1e-4) << r.worst_update().name;
  int zero = 0;
  for (const auto& g : r.gradients)
    if (g.ref_norm == 0) {
      EXPECT_EQ(g.score, 0.0) << g.name;
      ++zero;
    }
  EXPECT_GT(zero, 0);
  EXPECT_EQ(t.steps_taken(), 0);
}

// fit prints the line before training; a failed check warns and trains on (the default) or stops
// before the first step (require).
TEST(PjrtCrossCheck, FitPrintsWarnsOrStops) {
  auto client = tlaloc::testing::fake_client();
  FitOptions fo;
  fo.name = "test fit";
  fo.steps = 2;
  fo.progress = false;
  {
    auto m = disc::make_model();
    auto t = disc_trainer(*m, client.get());
    Output out;
    fo.out = out.f;
    fit(*t, fo);
    EXPECT_EQ(out.text().rfind("cross-check vs host lane passed: ", 0), 0u) << out.text();
    EXPECT_EQ(t->steps_taken(), 2);
  }
  Perturb wrong("cross_check_gradient", "2.weight", 1.05);
  {
    auto m = disc::make_model();
    auto t = disc_trainer(*m, client.get());
    Output out;
    fo.out = out.f;
    fit(*t, fo);
    EXPECT_NE(out.text().find("\nwarning: the pjrt lane's gradient of 2.weight disagrees with the "
                              "host lane's (relative error 5.0e-02 > 1e-02); training goes on"),
              std::string::npos)
        << out.text();
    EXPECT_EQ(t->steps_taken(), 2);
  }
  {
    auto m = disc::make_model();
    auto t = disc_trainer(*m, client.get());
    Output out;
    fo.out = out.f;
    fo.cross_check = CrossCheckMode::require;
    try {
      fit(*t, fo);
      FAIL() << "a failed check with require trained";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "test fit: the pjrt lane's gradient of 2.weight disagrees with the host lane's "
                "(relative error 5.0e-02 > 1e-02); stopped before the first step (--cross-check "
                "require)");
    }
    EXPECT_EQ(t->steps_taken(), 0);
    fo.cross_check = CrossCheckMode::off;  // not run: nothing printed, training goes on
    Output quiet;
    fo.out = quiet.f;
    fit(*t, fo);
    EXPECT_EQ(quiet.text().find("cross-check"), std::string::npos);
    EXPECT_EQ(t->steps_taken(), 2);
  }
}

// Hostile: the first layer frozen (a step input with no gradient): the check runs and passes,
// and the trainer steps after it; every parameter frozen is refused when the trainer is made.
TEST(PjrtCrossCheck, FrozenParametersPass) {
  auto client = tlaloc::testing::fake_client();
  for (const char* pattern : {"0.*", "*"}) {
    SCOPED_TRACE(pattern);
    auto m = disc::make_model();
    m->init(random::key(3));
    EXPECT_GT(nn::freeze(*m, {pattern}), 0);
    if (std::string(pattern) == "*") {
      EXPECT_THROW(disc_trainer(*m, client.get()), Error);
      continue;
    }
    auto t = disc_trainer(*m, client.get());
    CrossCheckReport r = cross_check(*t, {});
    EXPECT_TRUE(r.passed()) << r.summary();
    EXPECT_EQ(r.gradients.size(), 4u);  // 2.weight, 2.bias, 4.weight, 4.bias
    t->step({});
    EXPECT_TRUE(std::isfinite(t->read_last().loss));
  }
}
