// Hostile uses of DataInput::step_index and the in-program schedule: several step indices,
// BatchNorm buffers updated by the same step, restore mid-run, clipping (grad_norm output),
// f16 loss scaling, evaluations, misuse. Oracle: the same training fed the same draws as
// per-step inputs drawn on the host (bitwise equal parameters, buffers, losses).
#include <gtest/gtest.h>

#include "support/error_of.h"
#include "support/train_test_util.h"
#include "tlaloc/nn/batch_norm.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/random/program.h"
#include "tlaloc/random/random.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;
using tlaloc::testing::error_of;
using tlaloc::train_test::expect_same_state;

namespace {

constexpr int64_t kRows = 8, kIn = 5, kOut = 3;
const random::Key kDataKey = random::key(424242);

std::unique_ptr<nn::Sequential> bn_model() { return train_test::batch_norm_mlp(kIn, kOut); }

// loss = mean((m(x) - 1)²); aux: each step index as f32 (two of them: a and b, b offset).
std::vector<trace::Tensor> loss_of(nn::Module& m, const trace::Tensor& x,
                                   const std::vector<trace::Tensor>& steps) {
  m.train(true);
  trace::Tensor y = m(x) - 1.0;
  std::vector<trace::Tensor> out{trace::mean(y * y)};
  for (const auto& s : steps) out.push_back(trace::astype(s, DType::f32));
  return out;
}

trace::Tensor drawn_x(const trace::Tensor& step) {
  return random::uniform(random::fold_in(random::key_constant(kDataKey), step), Shape{kRows, kIn},
                         -1, 1);
}

Array host_x(int64_t step) {
  return random::uniform(random::fold_in(kDataKey, uint32_t(step)), Shape{kRows, kIn}, DType::f32,
                         -1, 1);
}

DataInput index(const char* name) { return {name, {DType::s32, Shape{}}, false, false, true}; }

// Two step indices; x drawn from the second.
LossFn two_indices() {
  return [](nn::Module& m, const Inputs& d) {
    return loss_of(m, drawn_x(d["b"]), {d["a"], d["b"]});
  };
}

LossFn drawn() {
  return [](nn::Module& m, const Inputs& d) { return loss_of(m, drawn_x(d["step"]), {d["step"]}); };
}

LossFn given() {
  return [](nn::Module& m, const Inputs& d) { return loss_of(m, d["x"], {d["s"]}); };
}

// The oracle trainer: x and the index given per step (no step_index input).
struct Given {
  std::unique_ptr<nn::Sequential> m = bn_model();
  std::unique_ptr<Trainer> t;
  explicit Given(TrainerOptions o = {}) {
    t = std::make_unique<Trainer>(*m, given(),
                                  std::vector<DataInput>{{"x", {DType::f32, Shape{kRows, kIn}}},
                                                         {"s", {DType::s32, Shape{}}}},
                                  optim::AdamW{.lr = 0.01}, o);
  }
  void step(int64_t s) { t->step({{"x", host_x(s)}, {"s", Array::scalar<int32_t>(int32_t(s))}}); }
};

}  // namespace

TEST(HostileStepIndex, TwoIndicesBothAdvanceWithBatchNormBuffers) {
  auto m = bn_model();
  Trainer t(*m, two_indices(), {index("a"), index("b")}, optim::AdamW{.lr = 0.01});
  Given g;
  for (int64_t s = 0; s < 5; ++s) {
    t.step({});
    g.step(s);
    const StepReport r = t.read_last();
    ASSERT_EQ(r.aux.size(), 2u);
    EXPECT_EQ(r.aux[0].at(0), double(s));
    EXPECT_EQ(r.aux[1].at(0), double(s));
    EXPECT_EQ(r.loss, g.t->read_last().loss) << s;
  }
  expect_same_state(t, *g.t);
}

// A step index placed between two per-step inputs, with BatchNorm buffers and clipping (the
// grad_norm output) and a schedule in the program (schedule_step output after it).
TEST(HostileStepIndex, IndexBetweenInputsWithClippingAndSchedule) {
  TrainerOptions o;
  o.update.max_norm = 0.05;
  o.schedule = optim::parse_schedule("warmup-cosine", 6, 2);
  auto m = bn_model();
  LossFn f = [](nn::Module& mm, const Inputs& d) {
    return loss_of(mm, drawn_x(d["step"]) + d["zero"] * d["zero2"], {d["step"]});
  };
  Trainer t(*m, f,
            {{"zero", {DType::f32, Shape{}}}, index("step"), {"zero2", {DType::f32, Shape{}}}},
            optim::AdamW{.lr = 0.01}, o);
  Given g(o);
  for (int64_t s = 0; s < 9; ++s) {
    t.step({{"zero", Array::scalar<float>(0)}, {"zero2", Array::scalar<float>(0)}});
    g.step(s);
    EXPECT_EQ(t.read_last().aux.at(0).at(0), double(s));
    EXPECT_EQ(t.read_last().loss, g.t->read_last().loss) << s;
  }
  expect_same_state(t, *g.t);
}

// Restored mid-run (checkpoint with buffers), under a schedule: equals the run in one piece.
TEST(HostileStepIndex, RestoreMidScheduleWithBuffers) {
  TrainerOptions o;
  o.schedule = optim::parse_schedule("cosine", 7);
  auto whole = bn_model(), first = bn_model(), second = bn_model();
  Trainer tw(*whole, drawn(), {index("step")}, optim::AdamW{.lr = 0.01}, o);
  for (int s = 0; s < 10; ++s) tw.step({});
  Trainer t1(*first, drawn(), {index("step")}, optim::AdamW{.lr = 0.01}, o);
  for (int s = 0; s < 4; ++s) t1.step({});
  const io::Checkpoint ck = to_checkpoint(t1, 1, 0);
  Trainer t2(*second, drawn(), {index("step")}, optim::AdamW{.lr = 0.01}, o);
  t2.step({});  // a step to throw away: restore must reset the index and schedule step too
  restore(t2, ck);
  for (int s = 4; s < 10; ++s) {
    t2.step({});
    EXPECT_EQ(t2.read_last().aux.at(0).at(0), double(s));
  }
  EXPECT_EQ(t2.read_last().loss, tw.read_last().loss);
  expect_same_state(tw, t2);
}

// f16 with loss scaling: the unscaled loss moved back to the front must not disturb the index
// (the last aux output). A large initial scale makes the first steps skip.
TEST(HostileStepIndex, F16LossScalingSkippedStepsStillAdvance) {
  TrainerOptions o;
  o.precision = DType::f16;
  o.update.loss_scaling.emplace();
  o.update.loss_scaling->init_scale = 2e6;
  o.schedule = optim::parse_schedule("step:2:0.5", 10);
  auto m = bn_model();
  Trainer t(*m, drawn(), {index("step")}, optim::AdamW{.lr = 0.01}, o);
  Given g(o);
  int skipped = 0;
  for (int64_t s = 0; s < 8; ++s) {
    t.step({});
    g.step(s);
    EXPECT_EQ(t.read_last().aux.at(0).at(0), double(s));
    EXPECT_EQ(t.last_skipped(), g.t->last_skipped()) << s;
    skipped += t.last_skipped();
    EXPECT_EQ(t.read_last().loss, g.t->read_last().loss) << s;
  }
  EXPECT_GT(skipped, 0);
  EXPECT_EQ(t.steps_taken(), 8);
  EXPECT_EQ(t.optimizer_step(), 8 - skipped);
  expect_same_state(t, *g.t);
}

// An evaluation beside a step-index train step: buffers and parameters lent and returned.
TEST(HostileStepIndex, EvalBesideTheIndexedStep) {
  auto m = bn_model();
  Trainer t(*m, drawn(), {index("step")}, optim::AdamW{.lr = 0.01});
  const int ev = t.add_eval(
      [](nn::Module& mm, const Inputs& d) {
        mm.train(false);
        trace::Tensor y = mm(d["x"]) - 1.0;
        return std::vector<trace::Tensor>{trace::mean(y * y)};
      },
      {{"x", {DType::f32, Shape{kRows, kIn}}}});
  Batch b{{"x", host_x(99)}};
  const double before = t.run_eval(ev, b)[0].at(0);
  t.step({});
  t.step({});
  const double after = t.run_eval(ev, b)[0].at(0);
  EXPECT_NE(before, after);
  t.step({});
  EXPECT_EQ(t.read_last().aux.at(0).at(0), 2.0);
}

// A step count past s32 with the schedule in the program (fed as an s32 index, it would wrap to
// -2^31 and train with lr · (-2^31 + 1) / warmup while current_lr() said the base lr): refused
// by load_state with one line, and the trainer goes on from where it was.
TEST(HostileStepIndex, ScheduleStepPastS32IsRefused) {
  nn::Linear lin(3, 2, false);
  lin.init(random::key(1));
  const std::vector<double> c = {0.5, -1, 2, 0.25, 1.5, -0.75};
  LossFn loss = [&](nn::Module& m, const Inputs&) -> std::vector<trace::Tensor> {
    const trace::Tensor w = m.named_parameters()[0].param->bound;
    return {trace::sum(w * trace::constant(Array::from_doubles(DType::f32, {2, 3}, c)))};
  };
  TrainerOptions o;
  o.schedule = optim::parse_schedule("constant", 100, 10);
  Trainer t(lin, loss, {}, optim::SGD{.lr = 0.05}, o);
  std::vector<Array> params, state;
  for (auto& p : t.named_parameters()) params.push_back(p.second);
  for (auto& s : t.optimizer_state()) state.push_back(s.second);
  const std::vector<double> w0 = params[0].to_doubles();
  EXPECT_EQ(error_of([&] { t.load_state(params, state, int64_t(1) << 31); }),
            "Trainer::load_state: step count 2147483648 is past the 2^31 - 1 steps the schedule "
            "in the program counts");
  t.load_state(params, state, 9);  // the last warm-up step: factor 1
  EXPECT_DOUBLE_EQ(t.current_lr(), 0.05);
  t.step({});
  const std::vector<double> w = t.named_parameters()[0].second.to_doubles();
  for (size_t i = 0; i < c.size(); ++i)  // SGD: w - lr · c
    EXPECT_NEAR(w[i], w0[i] - 0.05 * c[i], 1e-6) << i;
}

// A step index past s32 (fed as s32, it would wrap to -2^31: fmnist's rows would be sliced from
// a wrong place, lm's draws repeat): load_state and step refuse it in one line; the last step
// s32 holds runs with its own index.
TEST(HostileStepIndex, StepIndexPastS32IsRefused) {
  auto m = bn_model();
  Trainer t(*m, drawn(), {index("step")}, optim::SGD{.lr = 0.01});
  std::vector<Array> params, state;
  for (auto& p : t.named_parameters()) params.push_back(p.second);
  for (auto& s : t.optimizer_state()) state.push_back(s.second);
  EXPECT_EQ(error_of([&] { t.load_state(params, state, int64_t(1) << 31); }),
            "Trainer::load_state: step count 2147483648 is past the 2^31 - 1 steps the program's "
            "step index counts");
  t.load_state(params, state, INT32_MAX);
  t.step({});
  EXPECT_EQ(t.read_last().aux.at(0).at(0), double(float(INT32_MAX)));  // 2^31 as f32
  EXPECT_EQ(error_of([&] { t.step({}); }),
            "Trainer::step: step 2147483648 is past the 2^31 - 1 steps the program's step index "
            "counts");
  EXPECT_EQ(t.steps_taken(), int64_t(1) << 31);
}
