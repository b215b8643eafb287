// The recipes' full train steps survive StableHLO emit -> parse -> host run bit for bit: the
// emission the pjrt lane compiles is checked without a GPU.
#include <gtest/gtest.h>

#include "support/stablehlo_roundtrip.h"
#include "tlaloc/optim/optimizer.h"
#include "tlaloc/train/disc.h"
#include "tlaloc/train/fmnist.h"

using namespace tlaloc;

namespace {

// Real parameter values and fresh optimizer state instead of sample_inputs' generic ranges,
// plus lr / grad_scale, so the step runs on the values it sees in training.
std::vector<Array> step_inputs(const optim::TrainStep& s, std::vector<Array> data) {
  std::vector<Array> in = tlaloc::testing::sample_inputs(s.fn, 3);
  for (size_t i = 0; i < data.size(); ++i) in[i] = std::move(data[i]);
  auto state = optim::init_state(s.state);
  for (int j = 0; j < s.state.size(); ++j) in[size_t(s.state_input(j))] = state[size_t(j)];
  auto scalars = s.scalar_inputs(s.group_lr(), 1.0);
  for (size_t j = 0; j < scalars.size(); ++j) in[size_t(s.lr_input(0)) + j] = scalars[j];
  return in;
}

}  // namespace

TEST(StableHloSteps, DiscTrainStep) {
  auto s = train::disc::train_step(64);
  auto d = train::disc::make_data(random::key(1), 64);
  std::string text = tlaloc::testing::expect_stablehlo_roundtrip(s.fn, step_inputs(s, {d.x, d.y}));
  EXPECT_NE(text.find("tf.aliasing_output"), std::string::npos);
}

TEST(StableHloSteps, FmnistTrainStep) {
  const int64_t rows = 300, batch = 32;
  auto s = train::fmnist::train_step(rows, batch);
  Array images = random::uniform(random::key(2), Shape{rows, 784});
  Array labels = random::randint(random::key(3), Shape{rows}, 0, 10);
  Array idx = random::randint(random::key(4), Shape{batch}, 0, rows);
  Array w = Array::filled(DType::f32, Shape{batch}, 1.0);
  tlaloc::testing::expect_stablehlo_roundtrip(s.fn, step_inputs(s, {images, labels, idx, w}));
}
