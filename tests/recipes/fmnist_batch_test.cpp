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
      *r.model, fmnist::loss_fn(kRows, kBatch, drop_last, summed, 1),
      fmnist::data_inputs(kRows, kBatch, drop_last, 1), optim::AdamW{.lr = 1e-2});
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

// Data parallelism over 2 processes, each given its "rank": at a full batch and at the padded
// last one, the two ranks' summed losses (weights 1 / the global batch's real rows) add up to
// the whole batch's mean, so each rank took its own half.
TEST(FmnistInProgramBatch, TwoRanksTakeTheTwoHalvesOfEachBatch) {
  const std::vector<int32_t> order = fmnist::epoch_order(random::key(5), 0, kRows);
  auto first_loss = [&](int procs, int rank, bool summed, int64_t step) {
    auto m = fmnist::make_model({8});
    m->init(random::key(1));
    Trainer t(*m, fmnist::loss_fn(kRows, kBatch, false, summed, procs),
              fmnist::data_inputs(kRows, kBatch, false, procs), optim::AdamW{.lr = 1e-2});
    t.set_resident("images", images());
    t.set_resident("labels", labels());
    t.set_resident("order", fmnist::epoch_indices(order, kBatch));
    if (procs > 1) t.set_resident("rank", Array::scalar<int32_t>(rank));
    std::vector<Array> params, state;
    for (auto& [n, a] : t.named_parameters()) params.push_back(a);
    for (auto& [n, a] : t.optimizer_state()) state.push_back(a);
    t.load_state(params, state, step);  // the step index: batch `step` of the epoch
    t.step({});
    return t.read_last().loss;
  };
  for (int64_t step : {1, 3}) {  // batch 3 holds 2 real rows, both rank 0's
    SCOPED_TRACE(step);
    const double whole = first_loss(1, 0, false, step);
    const double r0 = first_loss(2, 0, true, step), r1 = first_loss(2, 1, true, step);
    EXPECT_NEAR(r0 + r1, whole, 1e-6 * whole);
    EXPECT_GT(r0, 0.0);
    if (step == 3) {
      EXPECT_EQ(r1, 0.0);  // all padding
    } else {
      EXPECT_GT(r1, 0.0);
    }
  }
}

TEST(FmnistInProgramBatch, EpochIndicesPadOrCut) {
  const std::vector<int32_t> order{4, 2, 0, 1, 3};
  EXPECT_EQ(fmnist::epoch_indices(order, 2).to_doubles(), (std::vector<double>{4, 2, 0, 1, 3, 0}));
  EXPECT_EQ(fmnist::epoch_indices(order, 2, true).to_doubles(), (std::vector<double>{4, 2, 0, 1}));
}

}  // namespace
