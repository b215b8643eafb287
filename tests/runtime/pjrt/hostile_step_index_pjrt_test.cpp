// The step index, the in-program schedule and BatchNorm buffers on the pjrt lane (the executing
// fake plugin): bitwise the host lane's steps, nothing uploaded per step, load_state mid-run,
// and the cross-check of such a step passes without changing the trainer.
#include <gtest/gtest.h>

#include "fake_client.h"
#include "support/train_test_util.h"
#include "tlaloc/nn/batch_norm.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/random/program.h"
#include "tlaloc/random/random.h"
#include "tlaloc/train/cross_check.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::train;

namespace {

constexpr int64_t kRows = 8, kIn = 5, kOut = 3;

std::unique_ptr<nn::Sequential> bn_model() { return train_test::batch_norm_mlp(kIn, kOut); }

LossFn drawn() {
  return [](nn::Module& m, const Inputs& d) {
    const trace::Tensor& step = d["step"];
    trace::Tensor x = random::uniform(
        random::fold_in(random::key_constant(random::key(424242)), step), Shape{kRows, kIn}, -1, 1);
    m.train(true);
    trace::Tensor y = m(x) - 1.0;
    return std::vector<trace::Tensor>{trace::mean(y * y), trace::astype(step, DType::f32)};
  };
}

std::unique_ptr<Trainer> make(nn::Module& m, runtime::pjrt::Client* client) {
  TrainerOptions o;
  o.lane = client ? Lane::pjrt : Lane::host;
  o.client = client;
  o.schedule = optim::parse_schedule("warmup-cosine", 6, 2);
  o.update.max_norm = 0.5;
  return std::make_unique<Trainer>(
      m, drawn(), std::vector<DataInput>{{"step", {DType::s32, Shape{}}, false, false, true}},
      optim::AdamW{.lr = 0.01}, o);
}

void expect_same(const Trainer& a, const Trainer& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(pa[i].second.bitwise_equal(pb[i].second)) << pa[i].first;
  auto ba = a.named_buffers(), bb = b.named_buffers();
  for (size_t i = 0; i < ba.size(); ++i)
    EXPECT_TRUE(ba[i].second.bitwise_equal(bb[i].second)) << ba[i].first;
  auto sa = a.optimizer_state(), sb = b.optimizer_state();
  for (size_t i = 0; i < sa.size(); ++i)
    EXPECT_TRUE(sa[i].second.bitwise_equal(sb[i].second)) << sa[i].first;
}

}  // namespace

TEST(HostileStepIndexPjrt, EqualsTheHostLaneAndUploadsNothingPerStep) {
  auto client = tlaloc::testing::fake_client();
  auto hm = bn_model(), dm = bn_model();
  auto host = make(*hm, nullptr), dev = make(*dm, client.get());
  dev->step({});
  host->step({});
  const int64_t up0 = client->uploads();
  for (int s = 1; s < 9; ++s) {
    host->step({});
    dev->step({});
  }
  EXPECT_EQ(client->uploads() - up0, 0);
  EXPECT_EQ(host->read_last().loss, dev->read_last().loss);
  EXPECT_EQ(dev->read_last().aux.at(0).at(0), 8.0);
  expect_same(*host, *dev);

  // load_state mid-run on the device: the index and schedule step go back to 3.
  std::vector<Array> params, state;
  auto hm2 = bn_model();
  auto h2 = make(*hm2, nullptr);
  for (int s = 0; s < 3; ++s) h2->step({});
  for (auto& p : h2->named_parameters()) params.push_back(p.second);
  for (auto& p : h2->optimizer_state()) state.push_back(p.second);
  std::vector<Array> bufs;
  for (auto& b : h2->named_buffers()) bufs.push_back(b.second);
  dev->load_state(params, state, 3);
  dev->load_buffers(bufs);
  for (int s = 3; s < 7; ++s) {
    h2->step({});
    dev->step({});
    EXPECT_EQ(dev->read_last().aux.at(0).at(0), double(s));
    EXPECT_EQ(h2->read_last().loss, dev->read_last().loss) << s;
  }
  expect_same(*h2, *dev);
}

TEST(HostileStepIndexPjrt, CrossCheckPassesAndLeavesTheTrainer) {
  auto client = tlaloc::testing::fake_client();
  auto hm = bn_model(), dm = bn_model();
  auto host = make(*hm, nullptr), dev = make(*dm, client.get());
  for (int s = 0; s < 3; ++s) {
    host->step({});
    dev->step({});
  }
  CrossCheckReport r = cross_check(*dev, {});
  std::printf("%s\n", r.summary().c_str());
  EXPECT_TRUE(r.passed()) << r.summary();
  for (int s = 3; s < 6; ++s) {
    host->step({});
    dev->step({});
    EXPECT_EQ(dev->read_last().aux.at(0).at(0), double(s));
  }
  EXPECT_EQ(host->read_last().loss, dev->read_last().loss);
  expect_same(*host, *dev);
}
