// The recipes' full train steps survive StableHLO emit -> parse -> host run bit for bit: the
// emission the pjrt lane compiles is checked without a GPU.
#include <gtest/gtest.h>

#include "support/stablehlo_roundtrip.h"
#include "support/train_test_util.h"
#include "tlaloc/optim/optimizer.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/recipes/fmnist.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/stablehlo/emit.h"

using namespace tlaloc;

namespace {

// Real parameter values and fresh optimizer state instead of sample_inputs' generic ranges,
// plus lr / grad_scale, so the step runs on the values it sees in training.
std::vector<Array> step_inputs(const optim::TrainStep& s, std::vector<Array> data) {
  std::vector<Array> in = tlaloc::testing::sample_inputs(s.fn, 3);
  for (size_t i = 0; i < data.size(); ++i) in[i] = std::move(data[i]);
  auto state = optim::init_state(s.state);
  for (int j = 0; j < s.state.size(); ++j) in[size_t(s.state_input(j))] = state[size_t(j)];
  auto scalars = s.scalar_inputs(s.group_lr(), 1.0);
  for (size_t j = 0; j < scalars.size(); ++j) in[size_t(s.lr_input(0)) + j] = scalars[j];
  return in;
}

}  // namespace

TEST(StableHloSteps, DiscTrainStep) {
  auto s = recipes::disc::train_step(64);
  auto d = recipes::disc::make_data(random::key(1), 64);
  std::string text = tlaloc::testing::expect_stablehlo_roundtrip(s.fn, step_inputs(s, {d.x, d.y}));
  EXPECT_NE(text.find("tf.aliasing_output"), std::string::npos);
}

TEST(StableHloSteps, FmnistTrainStep) {
  const int64_t rows = 300, batch = 32;
  auto s = recipes::fmnist::train_step(rows, batch);
  Array images = random::uniform(random::key(2), Shape{rows, 784});
  Array labels = random::randint(random::key(3), Shape{rows}, 0, 10);
  // The epoch's order (10 batches, the last one 12 real rows), sliced in the step by its index:
  // step 19 is the second epoch's last batch, padded.
  Array order =
      recipes::fmnist::epoch_indices(recipes::fmnist::epoch_order(random::key(4), 0, rows), batch);
  ASSERT_EQ(order.shape(), Shape{320});
  tlaloc::testing::expect_stablehlo_roundtrip(
      s.fn, step_inputs(s, {images, labels, order, Array::scalar<int32_t>(19)}));
}

// `train fmnist --model cnn`: convolution (and its VJP's reversed kernels), batch norm with its
// running statistics as outputs, max pooling (select_and_scatter in the gradient).
TEST(StableHloSteps, FmnistCnnTrainStep) {
  const int64_t rows = 100, batch = 8;
  auto s = recipes::fmnist::train_step_cnn(rows, batch, {4, 8});
  Array images = random::uniform(random::key(2), Shape{rows, 784});
  Array labels = random::randint(random::key(3), Shape{rows}, 0, 10);
  // drop_last: 12 full batches of 8, the last 4 rows of the order cut.
  Array order = recipes::fmnist::epoch_indices(
      recipes::fmnist::epoch_order(random::key(4), 0, rows), batch, true);
  ASSERT_EQ(order.shape(), Shape{96});
  std::string text = tlaloc::testing::expect_stablehlo_roundtrip(
      s.fn, step_inputs(s, {images, labels, order, Array::scalar<int32_t>(13)}));
  for (const char* op : {"stablehlo.convolution", "stablehlo.reverse", "stablehlo.reduce_window",
                         "stablehlo.select_and_scatter"})
    EXPECT_NE(text.find(op), std::string::npos) << op;
}

// The LM step with the layer choices of issue 7: RMSNorm, erf GELU (select / exp / divide
// compositions) and dropout (in-program threefry on the dropout_key input).
TEST(StableHloSteps, LmTrainStepWithDropoutRmsNormErfGelu) {
  nn::CausalLM m(train_test::tiny_lm("rmsnorm", "none", 0.2));
  m.init(random::key(5));
  auto s =
      train::build_train_step(m, recipes::lm::loss_fn(4), recipes::lm::data_inputs(64, 2, true),
                              recipes::lm::bench_optimizer());
  Array tokens = random::randint(random::key(6), Shape{64}, 0, 256);
  Array starts = Array::from<int32_t>({2}, {3, 40});
  tlaloc::testing::expect_stablehlo_roundtrip(
      s.fn, step_inputs(s, {tokens, starts, recipes::lm::dropout_key(1, 0)}));
}

// The LM step with LayerNorm and the tanh GELU (the lm recipe's choices, `tlaloc export lm`):
// the gelu / gelu_grad composites expanded by their decompositions.
TEST(StableHloSteps, LmTrainStepWithLayerNormTanhGelu) {
  nn::CausalLM m(train_test::tiny_lm("layernorm", "tanh", 0));
  m.init(random::key(7));
  auto s =
      train::build_train_step(m, recipes::lm::loss_fn(4), recipes::lm::data_inputs(64, 2, false),
                              recipes::lm::bench_optimizer());
  Array tokens = random::randint(random::key(8), Shape{64}, 0, 256);
  Array starts = Array::from<int32_t>({2}, {5, 31});
  std::string text =
      tlaloc::testing::expect_stablehlo_roundtrip(s.fn, step_inputs(s, {tokens, starts}));
  EXPECT_EQ(text.find("tlaloc.gelu"), std::string::npos);
  EXPECT_EQ(text.find("tlaloc.layer_norm"), std::string::npos);
  EXPECT_NE(text.find("stablehlo.tanh"), std::string::npos);
}

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The reductions the found_inf output is computed from: walked back from the output through
// scalar values, stopping at each reduce.
std::vector<ir::ValueId> found_inf_reductions(const optim::TrainStep& s) {
  std::vector<ir::ValueId> reduces, todo{s.fn.results[size_t(s.found_inf_output())]};
  std::vector<bool> seen(s.fn.nodes.size(), false);
  while (!todo.empty()) {
    const ir::ValueId v = todo.back();
    todo.pop_back();
    if (seen[size_t(v)]) continue;
    seen[size_t(v)] = true;
    const ir::Node& n = s.fn.nodes[size_t(v)];
    if (n.op == ir::Op::reduce) {
      reduces.push_back(v);
      continue;
    }
    if (n.type.shape.rank() == 0)
      for (ir::ValueId o : n.operands) todo.push_back(o);
  }
  return reduces;
}

}  // namespace

// `tlaloc export lm` (bench/lm_step_jax.py's model): no more dot_generals and transposes than
// JAX's lowering of the same step, and found-inf is one reduction over every gradient. JAX's
// counts, from its rules: 13 GEMMs forward (per block the QKV projection, q·kᵀ, p·v, the output
// projection, fc1, fc2; then the head) and two per GEMM in the backward: 39 dot_generals. Per
// block 5 transposes forward (q, k, v to heads, kᵀ, the output back), their 5 transposes and 2
// more in the backward (the batched GEMMs' rhs gradients, dot_general's transpose rule), and one
// per weight gradient of a dense layer (4 per block, the head): 33.
// scripts/device-check.sh prints JAX's own counts (bench/lm_step_jax.py --count-ops).
// With flat optimizer state (the pjrt lane's and the export's default) the AdamW update of all
// 37 parameters (one group) is one tlaloc.adam_update; per parameter it is 37.
TEST(StableHloSteps, BenchmarkLmStepHasAtMostJaxsGemmsAndTransposesAndOneFoundInf) {
  for (bool flat : {true, false}) {
    SCOPED_TRACE(flat ? "flat state" : "per-parameter state");
    auto s = recipes::lm::bench_train_step(4096, 20260921, 1, DType::f32, flat);
    const std::string text = stablehlo::emit(s.fn);
    EXPECT_LE(count(text, "\"stablehlo.dot_general\""), 39);
    EXPECT_LE(count(text, "\"stablehlo.transpose\""), 33);
    const std::vector<ir::ValueId> r = found_inf_reductions(s);
    ASSERT_EQ(r.size(), 1u);
    const ir::Node& all = s.fn.nodes[size_t(s.fn.nodes[size_t(r[0])].operands[0])];
    EXPECT_EQ(all.op, ir::Op::concatenate);
    EXPECT_EQ(int(all.operands.size()), s.num_params);
    int updates = 0;
    for (const ir::Node& n : s.fn.nodes) updates += n.op == ir::Op::adam_update;
    EXPECT_EQ(s.num_params, 37);
    EXPECT_EQ(updates, flat ? 1 : 37);
    // It still round-trips and agrees with the host lane.
    Array tokens = random::randint(random::key(9), Shape{4096}, 0, 256);
    // Its batch is drawn in the program from the step index (in-program threefry).
    tlaloc::testing::expect_stablehlo_roundtrip(
        s.fn, step_inputs(s, {tokens, Array::scalar<int32_t>(12345)}));
  }
}

// The LM step under mixed precision (`tlaloc export lm --precision bf16|f16`): bf16 / f16 dots
// and attention, f16 with loss scaling; the emitted text (composites expanded, then simplified)
// runs on the host lane to the original's bits.
TEST(StableHloSteps, LmTrainStepMixedPrecision) {
  for (DType compute : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(name(compute));
    nn::CausalLM m(train_test::tiny_lm("layernorm", "tanh", 0));
    m.init(random::key(7));
    auto s = train::build_train_step(
        m, recipes::lm::loss_fn(4), recipes::lm::data_inputs(64, 2, false),
        recipes::lm::bench_optimizer(), {}, nullptr, nullptr, nullptr, compute);
    Array tokens = random::randint(random::key(8), Shape{64}, 0, 256);
    Array starts = Array::from<int32_t>({2}, {5, 31});
    tlaloc::testing::expect_stablehlo_roundtrip(s.fn, step_inputs(s, {tokens, starts}));
  }
}
