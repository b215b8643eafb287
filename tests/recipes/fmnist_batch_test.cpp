// fmnist's batches taken inside the step (fmnist::loss_fn: the epoch's order resident, the rows
// sliced by the step's index) against batches built by hand on the host and fed per step
// (DataInput::batched idx / weight, the form the recipe had): over two epochs whose last batch is
// partial, the losses, parameters and moments are bit for bit the same, plain, summed (each real
// row weighing 1 / real rows) and with drop_last (the CNN's epochs).
#include <gtest/gtest.h>

#include <algorithm>

#include "support/train_test_util.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/fmnist.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace fmnist = tlaloc::recipes::fmnist;

namespace {

constexpr int64_t kRows = 50, kBatch = 16;  // 4 batches an epoch, the last of 2 real rows

struct Run {
  std::shared_ptr<nn::Sequential> model = fmnist::make_model({8});
  std::unique_ptr<Trainer> trainer;
};

Array images() { return random::uniform(random::key(2), Shape{kRows, fmnist::kPixels}); }
Array labels() { return random::randint(random::key(3), Shape{kRows}, 0, fmnist::kClasses); }

Run in_program(bool drop_last, bool summed) {
  Run r;
  r.model->init(random::key(1));
  r.trainer = std::make_unique<Trainer>(
      *r.model, fmnist::loss_fn(kRows, kBatch, drop_last, summed, 1, 0),
      fmnist::data_inputs(kRows, kBatch, drop_last), optim::AdamW{.lr = 1e-2});
  r.trainer->set_resident("images", images());
  r.trainer->set_resident("labels", labels());
  return r;
}

// The oracle: idx and weight per step, written here from the recipe's rule.
Run fed(bool summed) {
  Run r;
  r.model->init(random::key(1));
  LossFn loss = [summed](nn::Module& m, const Inputs& d) {
    trace::Tensor x = trace::take_rows(d["images"], d["idx"]);
    trace::Tensor y = trace::take_rows(d["labels"], d["idx"]);
    if (summed)
      return std::vector<trace::Tensor>{
          trace::sum(nn::cross_entropy_per_row(m(x), y) * d["weight"])};
    return std::vector<trace::Tensor>{nn::cross_entropy(m(x), y, d["weight"])};
  };
  std::vector<DataInput> data = {{"images", {DType::f32, Shape{kRows, fmnist::kPixels}}, true},
                                 {"labels", {DType::s32, Shape{kRows}}, true},
                                 {"idx", {DType::s32, Shape{kBatch}}, false, true},
                                 {"weight", {DType::f32, Shape{kBatch}}, false, true}};
  r.trainer = std::make_unique<Trainer>(*r.model, loss, data, optim::AdamW{.lr = 1e-2});
  r.trainer->set_resident("images", images());
  r.trainer->set_resident("labels", labels());
  return r;
}

Batch hand_batch(const std::vector<int32_t>& order, int64_t b, bool summed) {
  std::vector<int32_t> idx(kBatch, 0);
  std::vector<double> w(kBatch, 0);
  const int64_t real = std::min(kBatch, kRows - b * kBatch);
  for (int64_t i = 0; i < real; ++i) {
    idx[size_t(i)] = order[size_t(b * kBatch + i)];
    w[size_t(i)] = summed ? double(1.0f / float(real)) : 1.0;
  }
  return {{"idx", Array::from(Shape{kBatch}, idx)},
          {"weight", Array::from_doubles(DType::f32, Shape{kBatch}, w)}};
}

void compare(bool drop_last, bool summed) {
  Run a = in_program(drop_last, summed), b = fed(summed);
  const int64_t spe = fmnist::steps_per_epoch(kRows, kBatch, drop_last);
  EXPECT_EQ(spe, drop_last ? 3 : 4);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const std::vector<int32_t> order = fmnist::epoch_order(random::key(5), epoch, kRows);
    a.trainer->set_resident("order", fmnist::epoch_indices(order, kBatch, drop_last));
    for (int64_t s = 0; s < spe; ++s) {
      a.trainer->step({});
      b.trainer->step(hand_batch(order, s, summed));
      EXPECT_EQ(a.trainer->read_last().loss, b.trainer->read_last().loss)
          << "epoch " << epoch << " batch " << s;
    }
  }
  EXPECT_EQ(a.trainer->steps_taken(), 2 * spe);
  train_test::expect_same_state(*a.trainer, *b.trainer);
}

TEST(FmnistInProgramBatch, EqualsBatchesFedPerStep) { compare(false, false); }
TEST(FmnistInProgramBatch, SummedWeightsEqualThoseFedPerStep) { compare(false, true); }
TEST(FmnistInProgramBatch, DropLastEqualsFullBatchesFedPerStep) { compare(true, false); }

TEST(FmnistInProgramBatch, EpochIndicesPadOrCut) {
  const std::vector<int32_t> order{4, 2, 0, 1, 3};
  EXPECT_EQ(fmnist::epoch_indices(order, 2).to_doubles(), (std::vector<double>{4, 2, 0, 1, 3, 0}));
  EXPECT_EQ(fmnist::epoch_indices(order, 2, true).to_doubles(), (std::vector<double>{4, 2, 0, 1}));
}

}  // namespace
