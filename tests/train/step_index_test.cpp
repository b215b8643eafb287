// DataInput::step_index: the Trainer feeds the step's own index and the program advances it, so a
// batch drawn in the program (random::fold_in(key, step)) needs no upload. Oracles: the step
// count itself (each step reports the index it saw), and the same training fed the same draws
// from the host's random functions as a per-step input (bitwise equal parameters).
#include <gtest/gtest.h>

#include "support/error_of.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/random/program.h"
#include "tlaloc/random/random.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;
using tlaloc::testing::error_of;

namespace {

constexpr int64_t kRows = 8, kIn = 5, kOut = 3;
const random::Key kDataKey = random::key(424242);

// loss = mean((Linear(x) - 1)²) on x [kRows, kIn]; aux: the step index as f32.
std::vector<trace::Tensor> loss_of(nn::Module& m, const trace::Tensor& x,
                                   const trace::Tensor& step) {
  trace::Tensor y = m(x) - 1.0;
  return {trace::mean(y * y), trace::astype(step, DType::f32)};
}

// x drawn in the program from the step index.
LossFn drawn_in_program() {
  return [](nn::Module& m, const Inputs& d) {
    const trace::Tensor& step = d["step"];
    trace::Tensor x = random::uniform(random::fold_in(random::key_constant(kDataKey), step),
                                      Shape{kRows, kIn}, -1, 1);
    return loss_of(m, x, step);
  };
}

// x given per step (drawn on the host), the step index beside it.
LossFn given() {
  return [](nn::Module& m, const Inputs& d) { return loss_of(m, d["x"], d["step"]); };
}

Array host_x(int64_t step) {
  return random::uniform(random::fold_in(kDataKey, uint32_t(step)), Shape{kRows, kIn}, DType::f32,
                         -1, 1);
}

std::vector<DataInput> index_only() {
  return {{"step", {DType::s32, Shape{}}, false, false, true}};
}

std::unique_ptr<nn::Linear> model() {
  auto m = std::make_unique<nn::Linear>(kIn, kOut);
  m->init(random::key(7));
  return m;
}

}  // namespace

TEST(StepIndex, EachStepSeesItsOwnIndex) {
  auto m = model();
  Trainer t(*m, drawn_in_program(), index_only(), optim::SGD{.lr = 0.1});
  for (int64_t s = 0; s < 5; ++s) {
    t.step({});
    EXPECT_EQ(t.read_last().aux.at(0).at(0), double(s));
  }
}

TEST(StepIndex, InProgramDrawsTrainAsTheHostsDrawsGivenPerStep) {
  auto a = model(), b = model();
  Trainer ta(*a, drawn_in_program(), index_only(), optim::AdamW{.lr = 0.01});
  std::vector<DataInput> data = index_only();
  data.push_back({"x", {DType::f32, Shape{kRows, kIn}}});
  Trainer tb(*b, given(), data, optim::AdamW{.lr = 0.01});
  for (int64_t s = 0; s < 6; ++s) {
    ta.step({});
    tb.step({{"x", host_x(s)}});
    EXPECT_EQ(ta.read_last().loss, tb.read_last().loss) << "step " << s;
  }
  auto pa = ta.named_parameters(), pb = tb.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(pa[i].second.bitwise_equal(pb[i].second)) << pa[i].first;
}

// A checkpoint restored into a new Trainer goes on from its step count: the run split in two
// equals the run in one piece bit for bit.
TEST(StepIndex, RestoreGoesOnFromTheCheckpointsStep) {
  auto whole = model(), first = model(), second = model();
  Trainer tw(*whole, drawn_in_program(), index_only(), optim::AdamW{.lr = 0.01});
  for (int s = 0; s < 7; ++s) tw.step({});
  Trainer t1(*first, drawn_in_program(), index_only(), optim::AdamW{.lr = 0.01});
  for (int s = 0; s < 4; ++s) t1.step({});
  const io::Checkpoint ck = to_checkpoint(t1, 1, 0);
  Trainer t2(*second, drawn_in_program(), index_only(), optim::AdamW{.lr = 0.01});
  restore(t2, ck);
  EXPECT_EQ(t2.steps_taken(), 4);
  for (int s = 4; s < 7; ++s) {
    t2.step({});
    EXPECT_EQ(t2.read_last().aux.at(0).at(0), double(s));
  }
  auto pw = tw.named_parameters(), p2 = t2.named_parameters();
  for (size_t i = 0; i < pw.size(); ++i)
    EXPECT_TRUE(pw[i].second.bitwise_equal(p2[i].second)) << pw[i].first;
}

TEST(StepIndex, BadUsesAreOneLineErrors) {
  auto m = model();
  auto make = [&](DataInput d) {
    return error_of([&] { Trainer(*m, drawn_in_program(), {d}, optim::SGD{.lr = 0.1}); });
  };
  EXPECT_EQ(make({"step", {DType::s32, Shape{1}}, false, false, true}),
            "Trainer: step index input 'step' must be an s32 scalar, neither resident nor "
            "batched (it is s32[1])");
  EXPECT_EQ(make({"step", {DType::s32, Shape{}}, true, false, true}),
            "Trainer: step index input 'step' must be an s32 scalar, neither resident nor "
            "batched (it is s32[], resident)");
  Trainer t(*m, drawn_in_program(), index_only(), optim::SGD{.lr = 0.1});
  EXPECT_EQ(error_of([&] {
              t.step({{"step", Array::scalar<int32_t>(3)}});
            }),
            "Trainer::step: 'step' is the step index, which the Trainer feeds itself");
  EXPECT_EQ(error_of([&] { t.set_resident("step", Array::scalar<int32_t>(3)); }),
            "Trainer::set_resident: 'step' is not a resident input (resident: none)");
  EXPECT_EQ(error_of([&] { t.add_eval(drawn_in_program(), index_only()); }),
            "Trainer::add_eval: input 'step' is a step index, which only the train step takes "
            "(an evaluation is given all its inputs)");
  t.step({});  // nothing was lost
  EXPECT_EQ(t.read_last().aux.at(0).at(0), 0.0);
}
