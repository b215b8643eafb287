// The LM recipe with dropout: the per-step key is an input of the ONE compiled step (so every
// step uses the same executable with a fresh key), the same keys reproduce a run bit for bit,
// and another key changes it; the evaluation program (no key) runs the model in eval mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/train_test_util.h"
#include "tlaloc/recipes/lm.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace lm = tlaloc::recipes::lm;

namespace {

nn::CausalLMConfig tiny() { return train_test::tiny_lm("rmsnorm", "none", 0.2); }

Array corpus() {
  std::vector<int32_t> t;
  for (int i = 0; i < 64; ++i) t.push_back(int32_t("tlaloc drops bytes "[i % 19]));
  return Array::from(Shape{64}, t);
}

// A trainer (and its model) after `steps` steps whose dropout keys come from `key_seed`.
struct LmRun {
  std::unique_ptr<nn::CausalLM> model;
  std::unique_ptr<Trainer> trainer;
};
LmRun train(uint64_t key_seed, int steps) {
  LmRun r{std::make_unique<nn::CausalLM>(tiny()), nullptr};
  r.model->init(random::key(1));
  r.trainer = std::make_unique<Trainer>(*r.model, lm::loss_fn(4), lm::data_inputs(64, 2, true),
                                        lm::bench_optimizer());
  r.trainer->set_resident("tokens", corpus());
  for (int s = 0; s < steps; ++s)
    r.trainer->step({{"starts", Array::from<int32_t>({2}, {s, 3 * s + 1})},
                     {"dropout_key", lm::dropout_key(key_seed, s)}});
  return r;
}

TEST(LmDropout, KeyIsAStepInputAndRunsReproduce) {
  LmRun run = train(5, 3);
  const ir::Function& fn = run.trainer->step_function();
  auto it = std::find(fn.input_names.begin(), fn.input_names.end(), "dropout_key");
  ASSERT_NE(it, fn.input_names.end());
  EXPECT_EQ(fn.input_type(int(it - fn.input_names.begin())),
            (ir::TensorType{DType::u32, Shape{2}}));
  auto a = run.trainer->named_parameters();
  auto b = train(5, 3).trainer->named_parameters(), c = train(6, 3).trainer->named_parameters();
  bool all_same = true, some_differ = false;
  for (size_t i = 0; i < a.size(); ++i) {
    all_same = all_same && a[i].second.bitwise_equal(b[i].second);
    some_differ = some_differ || !a[i].second.bitwise_equal(c[i].second);
  }
  EXPECT_TRUE(all_same);
  EXPECT_TRUE(some_differ);
  // Evaluation has no key input: the model is captured in eval mode (identity dropout), so
  // two runs of it agree and need no key.
  Trainer* t = run.trainer.get();
  int id = t->add_eval(lm::loss_fn(4),
                       {{"tokens", {DType::s32, Shape{64}}}, {"starts", {DType::s32, Shape{2}}}});
  EXPECT_FALSE(run.model->training());
  Batch in{{"tokens", corpus()}, {"starts", Array::from<int32_t>({2}, {0, 7})}};
  double l1 = t->run_eval(id, in)[0].at(0), l2 = t->run_eval(id, in)[0].at(0);
  EXPECT_EQ(l1, l2);
  EXPECT_TRUE(std::isfinite(l1));
}

}  // namespace

// The batch drawn in the step (lm::sampled_loss_fn) is the host's: the same training fed
// random_starts and dropout_key per step gives bitwise the same losses and parameters.
TEST(LmSampled, InProgramDrawsEqualTheHostsPerStepInputs) {
  const uint64_t seed = 20260921;
  const int64_t batch = 2, ctx = 4, n = 64;
  auto make = [&] {
    auto m = std::make_unique<nn::CausalLM>(tiny());
    m->init(random::key(1));
    return m;
  };
  auto ma = make(), mb = make();
  Trainer a(*ma, lm::sampled_loss_fn(ctx, seed, batch, n, true), lm::sampled_inputs(n),
            lm::bench_optimizer());
  Trainer b(*mb, lm::loss_fn(ctx), lm::data_inputs(n, batch, true), lm::bench_optimizer());
  a.set_resident("tokens", corpus());
  b.set_resident("tokens", corpus());
  for (int64_t s = 0; s < 4; ++s) {
    a.step({});
    b.step({{"starts", lm::random_starts(seed, s, batch, n, ctx)},
            {"dropout_key", lm::dropout_key(seed, s)}});
    EXPECT_EQ(a.read_last().loss, b.read_last().loss) << "step " << s;
  }
  train_test::expect_same_state(a, b);
}
