// The Trainer with flat optimizer state (TrainerOptions::flat_state) against the per-parameter
// layout on the host lane: AdamW (amsgrad) with decay / no-decay groups and clipping gives the
// same losses, parameters and state bit for bit, named per parameter; a checkpoint written
// by either layout resumes in the other exactly as an uninterrupted run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "support/train_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/random/key.h"
#include "tlaloc/train/checkpointing.h"

using namespace tlaloc;
using namespace tlaloc::train;

namespace {

constexpr int64_t kRows = 10, kIn = 3, kClasses = 4;

struct TrainRun {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>();
  std::unique_ptr<Trainer> trainer;
};

TrainRun make_run(bool flat, uint64_t seed = 1) {
  TrainRun r;
  r.model->add(std::make_shared<nn::Linear>(kIn, 6))
      .add(std::make_shared<nn::LayerNorm>(6))
      .add(std::make_shared<nn::Linear>(6, kClasses));
  r.model->init(random::key(seed));
  LossFn loss = [](nn::Module& m, const Inputs& d) {
    return std::vector<trace::Tensor>{nn::cross_entropy(m(d["x"]), d["labels"])};
  };
  std::vector<DataInput> data = {{"x", {DType::f32, Shape{kRows, kIn}}, true},
                                 {"labels", {DType::s32, Shape{kRows}}, true}};
  TrainerOptions o;
  o.flat_state = flat;
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& p : r.model->named_parameters()) {
    names.push_back(p.name);
    shapes.push_back(p.param->value.shape());
  }
  o.update.groups = optim::decay_groups(names, shapes, 0.1);
  o.update.max_norm = 0.5;
  o.schedule = optim::parse_schedule("warmup-cosine", 20, 3);
  r.trainer =
      std::make_unique<Trainer>(*r.model, loss, data, optim::AdamW{.lr = 0.05, .amsgrad = true}, o);
  std::vector<double> x;
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kIn; ++j) x.push_back(std::cos(double(3 * i + j)) + (i % 4 == j));
    labels.push_back(int32_t(i % kClasses));
  }
  r.trainer->set_resident("x", Array::from_doubles(DType::f32, {kRows, kIn}, x));
  r.trainer->set_resident("labels", Array::from(Shape{kRows}, labels));
  return r;
}

TEST(FlatStateTrainer, SameBitsAsPerParameterStateNamedPerParameter) {
  TrainRun each = make_run(false), flat = make_run(true);
  ASSERT_FALSE(each.trainer->train_step().flat.has_value());
  ASSERT_TRUE(flat.trainer->train_step().flat.has_value());
  // Two groups, all f32: two buckets, each with exp_avg, exp_avg_sq, max_exp_avg_sq.
  EXPECT_EQ(flat.trainer->train_step().state.size(), 2 * 3 + 1);
  EXPECT_EQ(train_test::step_losses(*each.trainer, 8), train_test::step_losses(*flat.trainer, 8));
  train_test::expect_same_state(*each.trainer, *flat.trainer);
  EXPECT_EQ(flat.trainer->state_specs(), each.trainer->state_specs());
  EXPECT_EQ(flat.trainer->optimizer_state()[0].first, "optimizer.0.weight.exp_avg");
  EXPECT_EQ(flat.trainer->state_elements_per_rank(), each.trainer->state_elements_per_rank());
}

TEST(FlatStateTrainer, CheckpointsResumeAcrossLayouts) {
  constexpr int N = 5, M = 7;
  TrainRun full = make_run(false);
  const auto all = train_test::step_losses(*full.trainer, N + M);
  for (bool saved_flat : {false, true}) {
    SCOPED_TRACE(saved_flat ? "saved flat" : "saved per parameter");
    auto path = std::filesystem::temp_directory_path() /
                ("tlaloc_flat_state_" + std::to_string(getpid()) + ".safetensors");
    TrainRun first = make_run(saved_flat);
    train_test::step_losses(*first.trainer, N);
    io::save_checkpoint(path.string(), to_checkpoint(*first.trainer, 1, N));
    TrainRun resumed = make_run(!saved_flat, 42);
    restore(*resumed.trainer, io::load_checkpoint(path.string()));
    std::filesystem::remove(path);
    const auto tail = train_test::step_losses(*resumed.trainer, M);
    for (int i = 0; i < M; ++i) EXPECT_EQ(tail[size_t(i)], all[size_t(N + i)]) << "step " << N + i;
    train_test::expect_same_state(*full.trainer, *resumed.trainer);
  }
  EXPECT_LT(all.back(), all.front());
}

}  // namespace
