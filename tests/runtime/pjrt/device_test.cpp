// pjrt lane on a real device. Without a plugin or a GPU every test skips with probe()'s reason.
// Expected values are hand-computed; asynchronous runs and steps are checked by their waits.
#include <gtest/gtest.h>

#include <cmath>

#include "support/op_cases.h"
#include "support/stablehlo_roundtrip.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/runtime/pjrt/executable.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::ir;
using namespace tlaloc::runtime::pjrt;

namespace {

#define REQUIRE_DEVICE()              \
  do {                                \
    Status s = probe();               \
    if (!s) GTEST_SKIP() << s.reason; \
  } while (0)

// step(w, g, lr) = (w - lr * g, sum(w)); output 0 aliases (donates) w.
Function sgd_step() {
  Builder b("sgd");
  auto w = b.parameter({DType::f32, {4}}, "w");
  auto g = b.parameter({DType::f32, {4}}, "g");
  auto lr = b.parameter({DType::f32, {}}, "lr");
  auto upd = b.binary(Op::subtract, w, b.binary(Op::multiply, b.broadcast_in_dim(lr, {4}, {}), g));
  Function f = b.build({upd, b.reduce(w, ReduceKind::sum, {0})}, {"w", "sum"});
  f.aliases.push_back({0, 0});
  return f;
}

// sgd_step's arguments on the device: w = [1, 2, 3, 4], g = [1, 1, 1, 1], lr = 0.5.
std::vector<Buffer> sgd_args(Client& c) {
  std::vector<Buffer> args;
  args.push_back(c.to_device(Array::from<float>({4}, {1, 2, 3, 4})));
  args.push_back(c.to_device(Array::from<float>({4}, {1, 1, 1, 1})));
  args.push_back(c.to_device(Array::scalar(0.5f)));
  return args;
}

// |got - want| <= tol * (1 + |want|) elementwise, NaN matching NaN; integers and i1 exact.
// tol: a few ulps of the dtype (XLA's GPU transcendental functions are approximations).
void expect_close(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double tol = 0;
  switch (want.dtype()) {
    case DType::f64:
      tol = 1e-12;
      break;
    case DType::f32:
      tol = 1e-5;
      break;
    case DType::f16:
      tol = 4e-3;
      break;
    case DType::bf16:
      tol = 1.6e-2;
      break;
    default:
      tol = 0;
  }
  int bad = 0;
  for (int64_t i = 0; i < want.numel() && bad < 5; ++i) {
    double g = got.at(i), w = want.at(i);
    bool ok = (std::isnan(g) && std::isnan(w)) || g == w ||
              (tol > 0 && std::fabs(g - w) <= tol * (1 + std::fabs(w)));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", reference " << w;
    }
  }
}

}  // namespace

// The backend-ops test: every op over its dtypes on the device vs the host lane.
TEST(PjrtDevice, EveryOpAgreesWithReference) {
  REQUIRE_DEVICE();
  Options o;
  o.emit.precision = tlaloc::stablehlo::Precision::HIGHEST;  // no TF32 in dots
  for (auto& [op, fs] : tlaloc::testing::op_cases()) {
    uint64_t seed = 1;
    for (const Function& f : fs) {
      std::string what = std::string(op_name(op)) + " case " + std::to_string(seed);
      auto in = tlaloc::testing::sample_inputs(f, seed++);
      std::vector<Array> got;
      try {
        got = compile(f, default_client(), o)->run(in);
      } catch (const Error& e) {
        ADD_FAILURE() << what << ": " << e.what();
        continue;
      }
      auto want = runtime::host::compile(f)->run(in);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t k = 0; k < want.size(); ++k)
        expect_close(got[k], want[k], what + " output " + std::to_string(k));
    }
  }
}

TEST(PjrtDevice, RunsAndCachesByProgramText) {
  REQUIRE_DEVICE();
  Client& c = default_client();
  size_t before = c.cache_size();
  auto exe = compile(sgd_step(), c);
  auto exe2 = compile(sgd_step(), c);  // same text: no second compilation
  EXPECT_EQ(c.cache_size(), before + 1);
  std::vector<Array> in = {Array::from<float>({4}, {1, 2, 3, 4}),
                           Array::from<float>({4}, {2, 2, 2, 2}), Array::scalar(0.25f)};
  auto out = exe->run(in);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{10.0f}));
  EXPECT_FALSE(in[0].empty());  // run() does not consume
  auto out2 = exe2->run_donated(in);
  EXPECT_TRUE(in[0].empty());  // donated
  EXPECT_FALSE(in[1].empty());
  EXPECT_EQ(out2[0].to_vector<float>(), out[0].to_vector<float>());
}

TEST(PjrtDevice, StateStaysOnDeviceAndIsDonated) {
  REQUIRE_DEVICE();
  Client& c = default_client();
  auto exe = compile(sgd_step(), c);
  std::vector<Buffer> args = sgd_args(c);
  for (int step = 0; step < 3; ++step) {
    std::vector<Buffer> out = exe->run_buffers(args, true);
    EXPECT_TRUE(args[0].empty());
    args[0] = std::move(out[0]);
  }
  // w - 3 * 0.5 * 1
  EXPECT_EQ(c.to_host(args[0]).to_vector<float>(), (std::vector<float>{-0.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_THROW(c.to_host(Buffer()), Error);
}

TEST(PjrtDevice, XlaErrorsBecomeTlalocErrors) {
  REQUIRE_DEVICE();
  try {
    default_client().compile("module { this is not mlir }");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_Compile"), std::string::npos) << e.what();
  }
}

// Runs are queued without waiting: 20 chained donating runs, then one wait on the last one's
// completion event (the plugin gives one), and the values are those of 20 steps.
TEST(PjrtDevice, RunsQueueAndOneWaitCoversThem) {
  REQUIRE_DEVICE();
  Client& c = default_client();
  auto exe = compile(sgd_step(), c);
  std::vector<Buffer> args = sgd_args(c);
  const int64_t waits0 = c.call_times().waits;
  std::vector<Buffer> out;
  for (int step = 0; step < 20; ++step) {
    out = exe->run_buffers(args, true);
    args[0] = std::move(out[0]);
  }
  ASSERT_NE(out[1].done(), nullptr);
  EXPECT_EQ(c.call_times().waits, waits0);  // nothing waited yet
  out[1].done()->wait();
  EXPECT_TRUE(out[1].done()->ready());
  EXPECT_EQ(c.call_times().waits, waits0 + 1);
  // w - 20 * 0.5 * 1
  EXPECT_EQ(c.to_host(args[0]).to_vector<float>(), (std::vector<float>{-9, -8, -7, -6}));
}

// The Trainer on the device keeps at most max_in_flight = 2 steps pending: step s waits once
// (for step s - 2) beyond the first two, and the read waits for the rest.
TEST(PjrtDevice, TrainerKeepsAtMostTwoStepsInFlight) {
  REQUIRE_DEVICE();
  namespace disc = tlaloc::recipes::disc;
  Client& c = default_client();
  auto keys = random::split(random::key(7), 2);
  auto model = disc::make_model();
  model->init(keys[1]);
  train::TrainerOptions o;
  o.lane = train::Lane::pjrt;
  train::Trainer t(*model, disc::mse_loss_fn(), disc::data_inputs(64), optim::Adam{.lr = 0.02}, o);
  disc::Data d = disc::make_data(keys[0], 64);
  t.set_resident("x", d.x);
  t.set_resident("y", d.y);
  const int64_t waits0 = c.call_times().waits;
  for (int s = 1; s <= 10; ++s) {
    t.step({});
    EXPECT_EQ(t.in_flight(), std::min(s, 2)) << "step " << s;
    EXPECT_EQ(c.call_times().waits - waits0, std::max(0, s - 2)) << "step " << s;
  }
  const double loss = t.read_last().loss;
  EXPECT_EQ(t.in_flight(), 0);
  EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
}
