// BatchNorm1d / BatchNorm2d: running statistics, parameters and losses after 10 SGD steps and the
// eval-mode output against torch.nn.BatchNorm2d (tests/nn/batch_norm_torch.py, Debian's
// /usr/bin/python3) for momentum 0.1 and None (cumulative average); f64 finite differences of the
// training-mode forward; checkpoints holding the buffers; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "autodiff/harness.h"
#include "io/io_test_util.h"
#include "support/error_of.h"
#include "tlaloc/nn/batch_norm.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using trace::Tensor;

namespace {

const Shape kShape{4, 3, 5, 5};

// The batch of step s, the same formula as batch_norm_torch.py's.
Array batch(int s, const Shape& shape) {
  std::vector<double> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(0.37 * double(i) + 1.3 * s) * (1 + 0.1 * s) + 0.05 * s + 0.01 * double(i % 7);
  return Array::from_doubles(DType::f32, shape, v);
}

Array target(const Shape& shape) {
  std::vector<double> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11 * double(i));
  return Array::from_doubles(DType::f32, shape, v);
}

nlohmann::json torch_oracle() {
  static nlohmann::json j = [] {
    std::string cmd = "/usr/bin/python3 '" + std::string(TLALOC_SOURCE_DIR) +
                      "/tests/nn/batch_norm_torch.py' 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    int rc = p ? pclose(p) : -1;
    return rc == 0 ? nlohmann::json::parse(out) : nlohmann::json();
  }();
  return j;
}

void expect_near_all(const Array& got, const nlohmann::json& want, double tol, const char* what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.at(i), want[size_t(i)].get<double>(),
                tol * (1 + std::fabs(want[size_t(i)].get<double>())))
        << what << " element " << i;
}

train::LossFn mse_loss() {
  return [](nn::Module& m, const train::Inputs& d) {
    Tensor diff = m(d["x"]) - d["t"];
    return std::vector<Tensor>{trace::mean(trace::square(diff))};
  };
}

}  // namespace

TEST(BatchNorm, RunningStatisticsMatchPyTorchAfterTenSteps) {
  nlohmann::json want = torch_oracle();
  if (want.is_null()) GTEST_SKIP() << "/usr/bin/python3 with torch is needed";
  for (const char* kind : {"momentum_0.1", "momentum_none"}) {
    SCOPED_TRACE(kind);
    std::optional<double> momentum;
    if (std::string(kind) == "momentum_0.1") momentum = 0.1;
    nn::BatchNorm2d bn(3, 1e-5, momentum);
    bn.init(random::key(0));
    train::Trainer t(bn, mse_loss(),
                     {{"x", {DType::f32, kShape}, false}, {"t", {DType::f32, kShape}, true}},
                     optim::SGD{.lr = 0.1});
    t.set_resident("t", target(kShape));
    const auto& w = want[kind];
    for (int s = 0; s < 10; ++s) {
      t.step({{"x", batch(s, kShape)}});
      EXPECT_NEAR(t.read_last().loss, w["losses"][size_t(s)].get<double>(), 1e-5) << "step " << s;
    }
    for (auto& [name, a] : t.named_buffers()) expect_near_all(a, w[name], 1e-5, name.c_str());
    for (auto& [name, a] : t.named_parameters()) expect_near_all(a, w[name], 1e-5, name.c_str());
    // Eval mode reads the running statistics.
    t.sync_to_model();
    bn.eval();
    const int id = t.add_eval(
        [](nn::Module& m, const train::Inputs& d) { return std::vector<Tensor>{m(d["x"])}; },
        {{"x", {DType::f32, kShape}}});
    train::Batch in{{"x", batch(100, kShape)}};
    expect_near_all(t.run_eval(id, in)[0], w["eval"], 1e-5, "eval output");
  }
}

TEST(BatchNorm, CheckpointHoldsBuffersAndResumesThem) {
  auto make = [] {
    auto bn = std::make_shared<nn::BatchNorm2d>(3);
    bn->init(random::key(0));
    return bn;
  };
  auto bn = make();
  std::vector<train::DataInput> data{{"x", {DType::f32, kShape}, false},
                                     {"t", {DType::f32, kShape}, true}};
  train::Trainer a(*bn, mse_loss(), data, optim::AdamW{.lr = 0.01});
  a.set_resident("t", target(kShape));
  for (int s = 0; s < 3; ++s) a.step({{"x", batch(s, kShape)}});
  io::Checkpoint c = train::to_checkpoint(a, 1, 3);
  std::vector<std::string> names;
  for (auto& [n, v] : c.params) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                             "num_batches_tracked"}));
  auto bn2 = make();
  train::Trainer b(*bn2, mse_loss(), data, optim::AdamW{.lr = 0.01});
  b.set_resident("t", target(kShape));
  train::restore(b, c);
  for (int s = 3; s < 5; ++s) {
    a.step({{"x", batch(s, kShape)}});
    b.step({{"x", batch(s, kShape)}});
  }
  auto ba = a.named_buffers(), bb = b.named_buffers();
  ASSERT_EQ(ba.size(), 3u);
  for (size_t i = 0; i < ba.size(); ++i) EXPECT_TRUE(ba[i].second.bitwise_equal(bb[i].second));
  EXPECT_EQ(ba[2].second.at(0), 5);  // num_batches_tracked
  // The model gets them too (eval, save).
  b.sync_to_model();
  EXPECT_TRUE(bn2->named_buffers()[0].buffer->value.bitwise_equal(ba[0].second));
}

TEST(BatchNorm, TrainingForwardMatchesFiniteDifferences) {
  for (bool affine : {true, false}) {
    nn::BatchNorm1d bn(3, 1e-5, 0.1, affine);
    Array x = uniform({5, 3, 2}, 7, -2, 2);
    std::vector<Array> in{x};
    for (auto& p : bn.named_parameters()) {
      p.param->value = uniform(p.param->value.shape(), 11 + in.size(), -1, 1);
      in.push_back(p.param->value);
    }
    const size_t np = in.size() - 1;
    for (auto& b : bn.named_buffers()) {
      if (b.buffer->value.dtype() == DType::f32)
        b.buffer->value = b.buffer->value.astype(DType::f64);
      in.push_back(b.buffer->value);
    }
    std::vector<ir::TensorType> types;
    std::vector<int> wrt;
    for (size_t i = 0; i < in.size(); ++i) {
      types.push_back({in[i].dtype(), in[i].shape()});
      if (i <= np) wrt.push_back(int(i));
    }
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> t) {
          bn.bind(t.subspan(1, np));
          bn.bind_buffers(t.subspan(1 + np));
          return std::vector<Tensor>{bn(t[0])};
        },
        types, {}, {}, "bn");
    expect_vjp_matches_fd(f, in, wrt, 1e-6);
  }
}

TEST(BatchNorm, BadInputIsNamed) {
  EXPECT_NE(error_of([] { nn::BatchNorm2d(0); }).find("num_features 0"), std::string::npos);
  EXPECT_NE(error_of([] { nn::BatchNorm2d(3, 0); }).find("eps 0"), std::string::npos);
  EXPECT_NE(error_of([] { nn::BatchNorm2d(3, 1e-5, 1.5); }).find("momentum 1.5"),
            std::string::npos);
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(bn.repr(),
            "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  auto capture = [&](Shape s) {
    return error_of([&] {
      trace::capture(
          [&](std::span<const Tensor> t) {
            bn.bind(t.subspan(1, 2));
            bn.bind_buffers(t.subspan(3));
            return std::vector<Tensor>{bn(t[0])};
          },
          {{DType::f32, s},
           {DType::f32, {3}},
           {DType::f32, {3}},
           {DType::f32, {3}},
           {DType::f32, {3}},
           {DType::s32, {}}},
          {}, {}, "bn");
    });
  };
  EXPECT_NE(capture({2, 4, 5, 5}).find("is not [N, C, H, W] with C = 3"), std::string::npos);
  EXPECT_NE(capture({1, 3, 1, 1}).find("more than 1 value per channel"), std::string::npos);
}
