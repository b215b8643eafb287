// fmnist's in-program batches on the pjrt lane (the executing fake plugin): a new epoch's
// order set with set_resident while steps are in flight gives the bits of a run that waits for
// every step, and the host lane's values to rounding (the plugin's expanded cross-entropy
// rounds differently from the host kernel).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "fake_client.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/fmnist.h"
#include "tlaloc/train/fit.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace fmnist = tlaloc::recipes::fmnist;

namespace {

constexpr int64_t kRows = 40, kBatch = 16;  // 3 batches an epoch, the last of 8 real rows

// Parameters, optimizer state and the last loss after `steps` steps (3 an epoch).
std::vector<std::pair<std::string, Array>> run(runtime::pjrt::Client* client, int in_flight,
                                               int steps = 9) {
  auto m = fmnist::make_model({8});
  m->init(random::key(1));
  TrainerOptions o;
  o.max_in_flight = in_flight;
  if (client) {
    o.lane = Lane::pjrt;
    o.client = client;
  }
  Trainer t(*m, fmnist::loss_fn(kRows, kBatch, false, false, 1),
            fmnist::data_inputs(kRows, kBatch, false, 1), optim::AdamW{.lr = 1e-2}, o);
  t.set_resident("images", random::uniform(random::key(2), Shape{kRows, fmnist::kPixels}));
  t.set_resident("labels", random::randint(random::key(3), Shape{kRows}, 0, 10));
  for (int s = 0; s < steps; ++s) {  // nothing read between the steps
    if (s % 3 == 0)
      t.set_resident("order", fmnist::epoch_indices(
                                  fmnist::epoch_order(random::key(4), s / 3, kRows), kBatch));
    t.step({});
  }
  std::vector<std::pair<std::string, Array>> out = t.named_parameters();
  for (auto& st : t.optimizer_state()) out.push_back(std::move(st));
  out.emplace_back("loss", Array::scalar<double>(t.read_last().loss));
  return out;
}

}  // namespace

TEST(PjrtFmnistOrder, EpochOrdersSetWithStepsInFlight) {
  auto client = tlaloc::testing::fake_client();
  const auto queued = run(client.get(), 3), waited = run(client.get(), 0), host = run(nullptr, 2);
  ASSERT_EQ(queued.size(), waited.size());
  ASSERT_EQ(queued.size(), host.size());
  for (size_t i = 0; i < queued.size(); ++i) {
    SCOPED_TRACE(queued[i].first);
    EXPECT_TRUE(queued[i].second.bitwise_equal(waited[i].second));
    const std::vector<double> d = queued[i].second.to_doubles(), h = host[i].second.to_doubles();
    double diff = 0, scale = 0;
    for (size_t k = 0; k < h.size(); ++k) {
      diff = std::max(diff, std::abs(d[k] - h[k]));
      scale = std::max(scale, std::abs(h[k]));
    }
    EXPECT_LE(diff, 1e-5 * scale);
  }
}

// As `train fmnist --lane pjrt` runs it: fit's cross-check (require) takes the first batch, which
// puts the first epoch's order on the lane, and passes; the epochs after put theirs, and the
// run ends with the bits of 8 steps taken one by one.
TEST(PjrtFmnistOrder, FitCrossChecksThenTrainsEpochs) {
  auto client = tlaloc::testing::fake_client();
  auto m = fmnist::make_model({8});
  m->init(random::key(1));
  TrainerOptions o;
  o.lane = Lane::pjrt;
  o.client = client.get();
  Trainer t(*m, fmnist::loss_fn(kRows, kBatch, false, false, 1),
            fmnist::data_inputs(kRows, kBatch, false, 1), optim::AdamW{.lr = 1e-2}, o);
  t.set_resident("images", random::uniform(random::key(2), Shape{kRows, fmnist::kPixels}));
  t.set_resident("labels", random::randint(random::key(3), Shape{kRows}, 0, 10));
  FitOptions fo;
  fo.name = "fmnist order";
  fo.steps = 8;
  fo.steps_per_epoch = 3;
  fo.progress = false;
  fo.cross_check = CrossCheckMode::require;
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  fo.out = out;
  std::vector<int64_t> orders;  // the epochs whose order went up
  FitCallbacks cb;
  cb.batch = [&](const StepPosition& p) {
    if (orders.empty() || orders.back() != p.epoch) {
      t.set_resident("order", fmnist::epoch_indices(
                                  fmnist::epoch_order(random::key(4), p.epoch, kRows), kBatch));
      orders.push_back(p.epoch);
    }
    return Batch{};
  };
  fit(t, fo, cb);
  std::fclose(out);
  EXPECT_EQ(t.steps_taken(), 8);
  EXPECT_EQ(orders, (std::vector<int64_t>{0, 1, 2}));
  auto got = t.named_parameters();
  for (auto& st : t.optimizer_state()) got.push_back(std::move(st));
  got.emplace_back("loss", Array::scalar<double>(t.read_last().loss));
  const auto expected = run(client.get(), 0, 8);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(got[i].second.bitwise_equal(expected[i].second)) << got[i].first;
}
