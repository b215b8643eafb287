// Hostile configurations for the Trainer with flat optimizer state (TrainerOptions::flat_state)
// on the host lane. The oracle is always the same Trainer with flat_state = false (the
// per-parameter layout): losses, skips, loss scales, parameters, buffers and optimizer state bit
// for bit. Cases: a model mixing f64 and f32 parameters with an empty one and groups out of
// order; BatchNorm with frozen parameters and SGD nesterov; f16 with loss scaling that backs
// off and grows; checkpoints across layouts at a point where the scaler's state is not the
// initial one; load_state with wrong shapes / dtypes (refused naming the tensor, nothing
// changed); ZeRO-1 on one process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "support/error_of.h"
#include "support/mixed_module.h"
#include "support/train_test_util.h"
#include "tlaloc/distributed/communicator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/random/key.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/checkpointing.h"

using namespace tlaloc;
using namespace tlaloc::train;
using tlaloc::testing::error_of;
using trace::Tensor;

namespace {

constexpr int64_t kRows = 8;

using train_test::MixedModule;
using train_test::mse_loss;
using train_test::ramp;

std::unique_ptr<Trainer> mixed_trainer(MixedModule& m, bool flat, optim::Optimizer opt) {
  TrainerOptions o;
  o.flat_state = flat;
  return train_test::mixed_trainer(m, o, std::move(opt));
}

TEST(HostileFlatTrainer, MixedF64F32ModelWithAnEmptyParameterAndGroupsOutOfOrder) {
  for (const optim::Optimizer& opt : std::vector<optim::Optimizer>{
           optim::Adam{.lr = 0.05, .weight_decay = 0.1, .amsgrad = true},
           optim::AdamW{.amsgrad = true, .maximize = false},
           optim::SGD{.lr = 0.1, .momentum = 0.9, .nesterov = true}, optim::SGD{.lr = 0.1}}) {
    SCOPED_TRACE(optim::name(opt));
    MixedModule me, mf;
    auto each = mixed_trainer(me, false, opt), flat = mixed_trainer(mf, true, opt);
    ASSERT_TRUE(flat->train_step().flat.has_value());
    EXPECT_EQ(train_test::step_losses(*each, 6), train_test::step_losses(*flat, 6));
    train_test::expect_same_state(*each, *flat);
    EXPECT_EQ(flat->state_specs(), each->state_specs());
    EXPECT_EQ(flat->state_elements_per_rank(), each->state_elements_per_rank());
    EXPECT_EQ(flat->optimizer_step(), each->optimizer_step());
  }
}

TEST(HostileFlatTrainer, MixedModelCheckpointsResumeAcrossLayouts) {
  const optim::Optimizer opt = optim::Adam{.lr = 0.05, .amsgrad = true};
  constexpr int N = 3, M = 4;
  MixedModule mfull;
  auto full = mixed_trainer(mfull, false, opt);
  const auto all = train_test::step_losses(*full, N + M);
  for (bool saved_flat : {false, true}) {
    SCOPED_TRACE(saved_flat ? "saved flat" : "saved per parameter");
    auto path = std::filesystem::temp_directory_path() /
                ("tlaloc_hostile_flat_" + std::to_string(getpid()) + ".safetensors");
    MixedModule m1, m2;
    auto first = mixed_trainer(m1, saved_flat, opt);
    train_test::step_losses(*first, N);
    io::save_checkpoint(path.string(), to_checkpoint(*first, 1, N));
    auto resumed = mixed_trainer(m2, !saved_flat, opt);
    restore(*resumed, io::load_checkpoint(path.string()));
    std::filesystem::remove(path);
    const auto tail = train_test::step_losses(*resumed, M);
    for (int i = 0; i < M; ++i) EXPECT_EQ(tail[size_t(i)], all[size_t(N + i)]) << "step " << N + i;
    train_test::expect_same_state(*full, *resumed);
  }
}

// BatchNorm (buffers updated by the step), the first Linear frozen, SGD with nesterov momentum
// and a weight-decay group listing the trained parameters backwards.
TEST(HostileFlatTrainer, BatchNormWithFrozenParametersAndNesterov) {
  auto run = [](bool flat) {
    auto m = train_test::batch_norm_mlp(3, 2);
    nn::freeze(*m, {"0.*"});
    LossFn loss = mse_loss();
    std::vector<DataInput> data = {{"x", {DType::f32, Shape{kRows, 3}}, true},
                                   {"y", {DType::f32, Shape{kRows, 2}}, true}};
    TrainerOptions o;
    o.flat_state = flat;
    // Trained: 1.weight, 1.bias, 2.weight, 2.bias.
    o.update.groups = {{"decay", {2}, 0.1, 0.01}, {"rest", {3, 1, 0}, 0.05, 0.0}};
    o.update.max_norm = 0.1;
    auto t = std::make_unique<Trainer>(*m, loss, data,
                                       optim::SGD{.lr = 0.1, .momentum = 0.9, .nesterov = true}, o);
    t->set_resident("x", ramp(DType::f32, Shape{kRows, 3}, 0.9));
    t->set_resident("y", ramp(DType::f32, Shape{kRows, 2}, -0.4));
    const auto losses = train_test::step_losses(*t, 5);
    return std::make_tuple(std::move(m), std::move(t), losses);
  };
  auto [me, each, le] = run(false);
  auto [mf, flat, lf] = run(true);
  EXPECT_EQ(le, lf);
  train_test::expect_same_state(*each, *flat);
  const auto fe = each->frozen_parameters(), ff = flat->frozen_parameters();
  ASSERT_EQ(fe.size(), ff.size());
  for (size_t i = 0; i < fe.size(); ++i) EXPECT_TRUE(fe[i].second.bitwise_equal(ff[i].second));
}

// f16 compute with a loss scale so large the f16 gradients overflow: the first steps are
// skipped (the scale backs off), then it grows every 2 finite steps.
std::unique_ptr<Trainer> disc_f16(nn::Module& model, bool flat) {
  namespace disc = recipes::disc;
  auto keys = random::split(random::key(7), 2);
  model.init(keys[1]);
  TrainerOptions o;
  o.flat_state = flat;
  o.precision = DType::f16;
  o.update.loss_scaling =
      optim::UpdateOptions::LossScaling{.init_scale = 1 << 20, .growth_interval = 2};
  o.update.max_norm = 1.0;
  auto t = std::make_unique<Trainer>(model, disc::mse_loss_fn(), disc::data_inputs(16),
                                     optim::AdamW{.lr = 0.02, .amsgrad = true}, o);
  disc::Data d = disc::make_data(keys[0], 16);
  t->set_resident("x", d.x);
  t->set_resident("y", d.y);
  return t;
}

struct ScaledSteps {
  std::vector<double> loss, scale;
  std::vector<bool> skipped;
};
ScaledSteps scaled_steps(Trainer& t, int n) {
  ScaledSteps s;
  for (int i = 0; i < n; ++i) {
    t.step({});
    s.loss.push_back(t.read_last().loss);
    s.skipped.push_back(t.last_skipped());
    s.scale.push_back(t.loss_scale());
  }
  return s;
}

TEST(HostileFlatTrainer, F16LossScalingSkipsBacksOffAndGrowsAlike) {
  auto me = recipes::disc::make_model(), mf = recipes::disc::make_model();
  auto each = disc_f16(*me, false), flat = disc_f16(*mf, true);
  const ScaledSteps a = scaled_steps(*each, 14), b = scaled_steps(*flat, 14);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.skipped, b.skipped);
  EXPECT_EQ(a.scale, b.scale);
  EXPECT_TRUE(a.skipped.front()) << "the test means to start with skipped steps";
  EXPECT_EQ(std::count(a.skipped.begin(), a.skipped.end(), false), 8);  // skips and growths mixed
  EXPECT_GT(a.scale[4], a.scale[3]);
  train_test::expect_same_state(*each, *flat);
  EXPECT_EQ(flat->optimizer_step(), each->optimizer_step());
}

TEST(HostileFlatTrainer, F16CheckpointWithScalerStateResumesAcrossLayouts) {
  constexpr int N = 7, M = 5;
  auto mfull = recipes::disc::make_model();
  auto full = disc_f16(*mfull, false);
  const ScaledSteps all = scaled_steps(*full, N + M);
  for (bool saved_flat : {false, true}) {
    SCOPED_TRACE(saved_flat ? "saved flat" : "saved per parameter");
    auto path = std::filesystem::temp_directory_path() /
                ("tlaloc_hostile_flat_f16_" + std::to_string(getpid()) + ".safetensors");
    auto m1 = recipes::disc::make_model(), m2 = recipes::disc::make_model();
    auto first = disc_f16(*m1, saved_flat);
    scaled_steps(*first, N);
    io::save_checkpoint(path.string(), to_checkpoint(*first, 1, N));
    auto resumed = disc_f16(*m2, !saved_flat);
    restore(*resumed, io::load_checkpoint(path.string()));
    std::filesystem::remove(path);
    EXPECT_EQ(resumed->loss_scale(), all.scale[N - 1]);
    const ScaledSteps tail = scaled_steps(*resumed, M);
    for (int i = 0; i < M; ++i) {
      EXPECT_EQ(tail.loss[size_t(i)], all.loss[size_t(N + i)]) << "step " << N + i;
      EXPECT_EQ(tail.scale[size_t(i)], all.scale[size_t(N + i)]) << "step " << N + i;
    }
    train_test::expect_same_state(*full, *resumed);
  }
}

// load_state on a flat trainer with a state tensor of the wrong shape and one of the wrong
// dtype: refused naming both, parameters and state unchanged; then a good load is exact.
TEST(HostileFlatTrainer, LoadStateWithWrongShapesIsRefusedNamingTheTensorNothingChanged) {
  const optim::Optimizer opt = optim::Adam{.lr = 0.05, .amsgrad = true};
  MixedModule m1, m2;
  auto src = mixed_trainer(m1, false, opt);
  train_test::step_losses(*src, 3);
  auto dst = mixed_trainer(m2, true, opt);
  train_test::step_losses(*dst, 1);
  const auto params0 = dst->named_parameters();
  const auto state0 = dst->optimizer_state();
  std::vector<Array> params, state;
  for (auto& [n, a] : src->named_parameters()) params.push_back(a);
  for (auto& [n, a] : src->optimizer_state()) state.push_back(a);
  // State order: per parameter (w64, e32, s64, w32, b32) exp_avg, exp_avg_sq, max_exp_avg_sq.
  std::vector<Array> bad = state;
  bad[0] = Array(DType::f64, Shape{3, 2});  // w64.exp_avg transposed
  bad[10] = Array(DType::f64, Shape{3});    // w32.exp_avg_sq: f64 [3] for f32 [3, 1]
  bad[4] = Array(DType::f32, Shape{1});     // e32.exp_avg_sq: one element for none
  const std::string e = error_of([&] { dst->load_state(params, bad, 3); });
  EXPECT_NE(e.find("'optimizer.w64.exp_avg'"), std::string::npos) << e;
  EXPECT_NE(e.find("'optimizer.w32.exp_avg_sq'"), std::string::npos) << e;
  EXPECT_NE(e.find("'optimizer.e32.exp_avg_sq'"), std::string::npos) << e;
  const auto params1 = dst->named_parameters();
  const auto state1 = dst->optimizer_state();
  for (size_t i = 0; i < params0.size(); ++i)
    EXPECT_TRUE(params1[i].second.bitwise_equal(params0[i].second)) << params0[i].first;
  for (size_t i = 0; i < state0.size(); ++i)
    EXPECT_TRUE(state1[i].second.bitwise_equal(state0[i].second)) << state0[i].first;
  // Wrong parameter shape: refused too, nothing changed.
  std::vector<Array> bad_params = params;
  bad_params[2] = Array(DType::f32, Shape{});  // s64 as f32
  const std::string e2 = error_of([&] { dst->load_state(bad_params, state, 3); });
  EXPECT_NE(e2.find("'s64'"), std::string::npos) << e2;
  for (size_t i = 0; i < state0.size(); ++i)
    EXPECT_TRUE(dst->optimizer_state()[i].second.bitwise_equal(state0[i].second));
  // A good load: then both run alike.
  dst->load_state(params, state, 3);
  train_test::expect_same_state(*src, *dst);
  EXPECT_EQ(train_test::step_losses(*src, 3), train_test::step_losses(*dst, 3));
  train_test::expect_same_state(*src, *dst);
}

// ZeRO-1 on one process has nothing to shard: with flat state it must run, and equal the
// per-parameter layout.
TEST(HostileFlatTrainer, ZeroOneOnOneProcessWithFlatState) {
  auto run = [](bool flat) {
    auto m = train_test::batch_norm_mlp(3, 2);
    LossFn loss = mse_loss();
    std::vector<DataInput> data = {{"x", {DType::f32, Shape{kRows, 3}}, true},
                                   {"y", {DType::f32, Shape{kRows, 2}}, true}};
    TrainerOptions o;
    o.flat_state = flat;
    o.zero = 1;
    auto t = std::make_unique<Trainer>(*m, loss, data, optim::AdamW{}, o);
    t->set_resident("x", ramp(DType::f32, Shape{kRows, 3}, 0.9));
    t->set_resident("y", ramp(DType::f32, Shape{kRows, 2}, -0.4));
    auto l = train_test::step_losses(*t, 3);
    return std::make_tuple(std::move(m), std::move(t), l);
  };
  std::string e = error_of([&] { run(true); });
  EXPECT_EQ(e, "(no error)");
  auto [me, each, le] = run(false);
  auto [mf, flat, lf] = run(true);
  EXPECT_TRUE(flat->train_step().flat.has_value());
  EXPECT_EQ(le, lf);
  train_test::expect_same_state(*each, *flat);
}

// Rank 0 of two whose peer holds the same values as this rank (an identical twin): a sum over
// the ranks is x + x (exact), max / min are x, a gather repeats this rank's bytes. Flat and
// per-parameter runs in this world see the same collectives.
class TwinWorld : public distributed::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "test double, identical twin ranks"; }
  void all_reduce(void* data, int64_t count, DType dtype, distributed::Reduction op) override {
    if (op != distributed::Reduction::sum) return;
    for (int64_t i = 0; i < count; ++i) switch (dtype) {
        case DType::f32:
          static_cast<float*>(data)[i] *= 2;
          break;
        case DType::f64:
          static_cast<double*>(data)[i] *= 2;
          break;
        case DType::s32:
          static_cast<int32_t*>(data)[i] *= 2;
          break;
        case DType::u32:
          static_cast<uint32_t*>(data)[i] *= 2;
          break;
        default:
          throw Error("twin world: dtype");
      }
  }
  void all_gather(const void* in, void* out, int64_t bytes) override {
    std::memmove(out, in, size_t(bytes));
    std::memcpy(static_cast<char*>(out) + bytes, out, size_t(bytes));
  }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
};
struct TwinGuard {
  TwinGuard() { distributed::set_world(std::make_unique<TwinWorld>()); }
  ~TwinGuard() { distributed::set_world(nullptr); }
};

std::unique_ptr<Trainer> twin_trainer(nn::Module& m, std::optional<bool> flat, int zero) {
  LossFn loss = mse_loss();
  std::vector<DataInput> data = {{"x", {DType::f32, Shape{kRows, 3}}, false, true},
                                 {"y", {DType::f32, Shape{kRows, 2}}, false, true}};
  TrainerOptions o;
  o.flat_state = flat;
  o.zero = zero;
  o.update.max_norm = 0.3;
  return std::make_unique<Trainer>(m, loss, data, optim::AdamW{.amsgrad = true}, o);
}

// Flat state with ZeRO-1 over two processes: refused in one line naming both.
TEST(HostileFlatTrainer, FlatWithZeroOverTwoProcessesIsRefusedInOneLine) {
  TwinGuard twin;
  auto m = train_test::batch_norm_mlp(3, 2);
  const std::string e = error_of([&] { twin_trainer(*m, true, 1); });
  EXPECT_NE(e.find("flat optimizer state with ZeRO-1 is not built"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // Unset flat_state on the host lane: ZeRO-1 as before, no refusal.
  EXPECT_EQ(error_of([&] { twin_trainer(*m, std::nullopt, 1); }), "(no error)");
}

// Flat state with data parallelism (no ZeRO): the same bits as the per-parameter layout.
TEST(HostileFlatTrainer, FlatWithDataParallelismEqualsPerParameter) {
  TwinGuard twin;
  auto me = train_test::batch_norm_mlp(3, 2), mf = train_test::batch_norm_mlp(3, 2);
  auto each = twin_trainer(*me, false, 0), flat = twin_trainer(*mf, true, 0);
  ASSERT_TRUE(flat->train_step().flat.has_value());
  for (int s = 0; s < 4; ++s) {
    Batch b1{{"x", ramp(DType::f32, Shape{kRows, 3}, 0.2 * s)},
             {"y", ramp(DType::f32, Shape{kRows, 2}, 1.0 + s)}};
    Batch b2 = b1;
    each->step(std::move(b1));
    flat->step(std::move(b2));
    EXPECT_EQ(each->read_last().loss, flat->read_last().loss) << "step " << s;
    EXPECT_EQ(each->read_last().grad_norm, flat->read_last().grad_norm) << "step " << s;
  }
  train_test::expect_same_state(*each, *flat);
  EXPECT_EQ(flat->state_elements_per_rank(), each->state_elements_per_rank());
}

// A parameter the loss never reads (its gradient a constant zero, which the step may fold into
// the bucket's concatenation) between two that are read, one of them twice.
class UnusedModule : public nn::Module {
 public:
  UnusedModule() {
    register_parameter("a", ramp(DType::f32, Shape{3}, 0.2));
    register_parameter("unused", ramp(DType::f32, Shape{2, 2}, 0.7));
    register_parameter("twice", ramp(DType::f32, Shape{3}, 1.1));
  }
  Tensor forward(const Tensor& x) override {
    const int64_t n = x.type().shape[0];
    Tensor t = broadcast_to(reshape(param("twice"), {1, 3}), Shape{n, 3});
    Tensor a = broadcast_to(reshape(param("a"), {1, 3}), Shape{n, 3});
    return tanh(x * a + t) * t;
  }
  std::string repr() const override { return "UnusedModule()"; }
};

TEST(HostileFlatTrainer, UnusedAndTwiceUsedParameters) {
  for (const optim::Optimizer& opt :
       std::vector<optim::Optimizer>{optim::AdamW{.lr = 0.05, .weight_decay = 0.3},
                                     optim::SGD{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1}}) {
    SCOPED_TRACE(optim::name(opt));
    auto run = [&](bool flat) {
      auto m = std::make_unique<UnusedModule>();
      LossFn loss = mse_loss();
      std::vector<DataInput> data = {{"x", {DType::f32, Shape{kRows, 3}}, true},
                                     {"y", {DType::f32, Shape{kRows, 3}}, true}};
      TrainerOptions o;
      o.flat_state = flat;
      auto t = std::make_unique<Trainer>(*m, loss, data, opt, o);
      t->set_resident("x", ramp(DType::f32, Shape{kRows, 3}, 0.5));
      t->set_resident("y", ramp(DType::f32, Shape{kRows, 3}, -1.0));
      auto l = train_test::step_losses(*t, 4);
      return std::make_tuple(std::move(m), std::move(t), l);
    };
    auto [me, each, le] = run(false);
    auto [mf, flat, lf] = run(true);
    EXPECT_EQ(le, lf);
    train_test::expect_same_state(*each, *flat);
  }
}

}  // namespace
