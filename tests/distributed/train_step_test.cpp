// Data-parallel train steps across the processes of this run (N = 2 under mpiexec -np 2, N = 1
// alone): the exported StableHLO of a replica's step (all_reduce on the loss and gradients,
// mhlo.num_replicas = N) parses back and runs bitwise as the step itself on every rank; the
// ZeRO-1 shards by hand; one SGD step of data parallelism equals one process's step on the whole
// batch (the oracle: the same model on all rows, no collectives).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/stablehlo_roundtrip.h"
#include "tlaloc/distributed/communicator.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/optim/zero.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/fmnist.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;

namespace {

int N() { return distributed::world().size(); }
int R() { return distributed::world().rank(); }

TEST(DataParallelStep, ExportedFmnistAndLmStepsRoundTrip) {
  std::vector<optim::TrainStep> steps{recipes::fmnist::train_step(96, 48, {32}, N())};
  if (recipes::lm::kBenchBatch % N() == 0)  // 4 rows: 1, 2 or 4 processes
    steps.push_back(recipes::lm::bench_train_step(256, 7, N()));
  for (const optim::TrainStep& s : steps) {
    SCOPED_TRACE(s.fn.name);
    // Each rank its own inputs (its rows): the all_reduce then has something to add.
    std::vector<Array> in = tlaloc::testing::sample_inputs(s.fn, 11 + uint64_t(R()));
    for (int j = 0; j < s.state.size(); ++j) {  // a valid optimizer state: moments >= 0
      Array& a = in[size_t(s.state_input(j))];
      if (is_floating(a.dtype()))
        for (int64_t e = 0; e < a.numel(); ++e)
          if (a.dtype() == DType::f32) a.data<float>()[e] = std::fabs(a.data<float>()[e]);
    }
    for (int k = 0; k < int(s.groups.size()) + 1; ++k)  // lr and grad_scale: positive scalars
      in[size_t(s.lr_input(0) + k)] = Array::scalar<double>(k == int(s.groups.size()) ? 1.0 : 1e-3);
    std::string text = tlaloc::testing::expect_stablehlo_roundtrip(s.fn, in);
    EXPECT_NE(text.find("mhlo.num_replicas = " + std::to_string(N()) + " : i32"),
              std::string::npos);
    EXPECT_EQ(text.find("stablehlo.all_reduce") != std::string::npos, N() > 1);
  }
}

TEST(DataParallelStep, ZeroShardsByHand) {
  // Parameters of 5, 3 and 4 elements, each in chunks of ceil(n / N): over 2 ranks 3, 2, 2;
  // over 3 ranks 2, 1, 2 (the third rank's chunk of the last one is empty).
  std::vector<ir::TensorType> types{
      {DType::f32, Shape{5}}, {DType::f32, Shape{3}}, {DType::f32, Shape{2, 2}}};
  std::vector<std::string> names{"a", "b", "c"};
  optim::Adam adam;
  auto pieces = [&](int rank, int n) {
    std::vector<std::vector<int64_t>> out;
    for (const auto& p : optim::zero_shard(adam, types, names, rank, n).pieces)
      out.push_back({p.param, p.lo, p.hi});
    return out;
  };
  using V = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(pieces(0, 2), (V{{0, 0, 3}, {1, 0, 2}, {2, 0, 2}}));
  EXPECT_EQ(pieces(1, 2), (V{{0, 3, 5}, {1, 2, 3}, {2, 2, 4}}));
  EXPECT_EQ(pieces(0, 3), (V{{0, 0, 2}, {1, 0, 1}, {2, 0, 2}}));
  EXPECT_EQ(pieces(1, 3), (V{{0, 2, 4}, {1, 1, 2}, {2, 2, 4}}));
  EXPECT_EQ(pieces(2, 3), (V{{0, 4, 5}, {1, 2, 3}}));
  optim::ZeroShard z = optim::zero_shard(adam, types, names, 2, 3);
  EXPECT_EQ(z.chunk, (std::vector<int64_t>{2, 1, 2}));
  optim::StateLayout l = optim::shard_layout(z);
  ASSERT_EQ(l.size(), 5);  // a and b: exp_avg, exp_avg_sq each; the step count
  EXPECT_EQ(l.slots[0].type.shape, Shape{1});
  EXPECT_EQ(l.slots[2].type.shape, Shape{1});
  EXPECT_EQ(l.slots[4].param, -1);
}

// x [4N, 3] -> Linear(3, 2) -> mse against y; Adam lr 0.5. Rows of rank r: 4r .. 4r + 3.
struct Toy {
  std::vector<float> x, y;
  explicit Toy(int64_t rows) {
    for (int64_t i = 0; i < rows * 3; ++i) x.push_back(float(std::sin(0.7 * double(i))));
    for (int64_t i = 0; i < rows * 2; ++i) y.push_back(float(std::cos(1.3 * double(i))));
  }
};

std::vector<std::pair<std::string, Array>> one_step(bool data_parallel, int zero) {
  const int64_t rows = 4 * N();
  Toy t(rows);
  nn::Linear model(3, 2);
  model.init(random::key(3));
  train::LossFn loss = [](nn::Module& m, const train::Inputs& d) {
    return std::vector<trace::Tensor>{nn::mse_loss(m(d["x"]), d["y"])};
  };
  train::TrainerOptions o;
  o.zero = zero;
  o.num_threads = 1;
  std::vector<train::DataInput> data{{"x", {DType::f32, Shape{rows, 3}}, false, data_parallel},
                                     {"y", {DType::f32, Shape{rows, 2}}, false, data_parallel}};
  train::Trainer tr(model, loss, data, optim::Adam{.lr = 0.5}, o);
  tr.step({{"x", Array::from<float>(Shape{rows, 3}, t.x)},
           {"y", Array::from<float>(Shape{rows, 2}, t.y)}});
  auto out = tr.named_parameters();
  for (auto& s : tr.optimizer_state()) out.push_back(std::move(s));
  return out;
}

TEST(DataParallelStep, OneAdamStepEqualsOneProcessOnTheWholeBatch) {
  // Unbatched inputs: every rank runs the whole batch, and the mean of N equal gradients is the
  // one-process gradient (exact for N = 1 and 2). Batched: each rank runs its 4 rows.
  auto whole = one_step(false, 0);
  auto split = one_step(true, 0);
  auto zero = one_step(true, 1);
  ASSERT_EQ(whole.size(), split.size());
  ASSERT_EQ(whole.size(), zero.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    SCOPED_TRACE(whole[i].first);
    EXPECT_EQ(whole[i].first, split[i].first);
    EXPECT_TRUE(split[i].second.bitwise_equal(zero[i].second)) << "ZeRO-1 differs";
    for (int64_t e = 0; e < whole[i].second.numel(); ++e)
      EXPECT_NEAR(split[i].second.at(e), whole[i].second.at(e),
                  1e-6 * std::max(1.0, std::fabs(whole[i].second.at(e))));
  }
}

}  // namespace
