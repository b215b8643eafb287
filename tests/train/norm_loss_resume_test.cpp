// A tiny classifier with the fused composites (Linear -> LayerNorm -> Linear, the weighted
// cross_entropy with a masked row and a label outside [0, C)): trained N steps, saved, restored
// into a differently initialised model and continued M steps, it ends bitwise identical
// (losses, parameters, moments) to an uninterrupted N + M run; the loss goes down.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "support/train_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/nn/transformer.h"
#include "tlaloc/random/key.h"
#include "tlaloc/train/checkpointing.h"

using namespace tlaloc;
using namespace tlaloc::train;

namespace {

constexpr int64_t kRows = 12, kIn = 4, kClasses = 3;

struct TrainRun {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>();
  std::unique_ptr<Trainer> trainer;
};

TrainRun make_run(uint64_t seed) {
  TrainRun r;
  r.model->add(std::make_shared<nn::Linear>(kIn, 8))
      .add(std::make_shared<nn::LayerNorm>(8))
      .add(std::make_shared<nn::Linear>(8, kClasses));
  r.model->init(random::key(seed));
  LossFn loss = [](nn::Module& m, const Inputs& d) {
    return std::vector<trace::Tensor>{nn::cross_entropy(m(d["x"]), d["labels"], d["weights"])};
  };
  std::vector<DataInput> data = {{"x", {DType::f32, Shape{kRows, kIn}}, true},
                                 {"labels", {DType::s32, Shape{kRows}}, true},
                                 {"weights", {DType::f32, Shape{kRows}}, true}};
  r.trainer = std::make_unique<Trainer>(*r.model, loss, data, optim::Adam{.lr = 0.05});
  std::vector<double> x;
  std::vector<int32_t> labels;
  std::vector<double> w;
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kIn; ++j) x.push_back(std::sin(double(i * kIn + j)) + (i % 3 == j));
    labels.push_back(i == 5 ? -1 : int32_t(i % 3));  // row 5: outside [0, C)
    w.push_back(i == 7 ? 0.0 : 1.0);                 // row 7: masked
  }
  r.trainer->set_resident("x", Array::from_doubles(DType::f32, {kRows, kIn}, x));
  r.trainer->set_resident("labels", Array::from(Shape{kRows}, labels));
  r.trainer->set_resident("weights", Array::from_doubles(DType::f32, {kRows}, w));
  return r;
}

TEST(NormLossResume, SaveRestoreContinueIsBitwiseIdentical) {
  constexpr int N = 6, M = 9;
  auto path = std::filesystem::temp_directory_path() /
              ("tlaloc_norm_loss_resume_" + std::to_string(getpid()) + ".safetensors");
  TrainRun first = make_run(1);
  auto head = train_test::step_losses(*first.trainer, N);
  io::save_checkpoint(path.string(), to_checkpoint(*first.trainer, 1, N));

  TrainRun full = make_run(1);
  auto all = train_test::step_losses(*full.trainer, N + M);
  TrainRun resumed = make_run(42);
  restore(*resumed.trainer, io::load_checkpoint(path.string()));
  std::filesystem::remove(path);
  auto tail = train_test::step_losses(*resumed.trainer, M);

  for (int i = 0; i < N; ++i) EXPECT_EQ(head[size_t(i)], all[size_t(i)]) << "step " << i;
  for (int i = 0; i < M; ++i) EXPECT_EQ(tail[size_t(i)], all[size_t(N + i)]) << "step " << N + i;
  EXPECT_LT(all.back(), 0.5 * all.front());
  train_test::expect_same_state(*full.trainer, *resumed.trainer);
}

}  // namespace
