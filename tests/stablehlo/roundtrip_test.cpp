// emit -> parse -> run equals run of the original, for every op of ops.def over the dtypes it
// accepts (tests/support/stablehlo_roundtrip.h).
#include <gtest/gtest.h>

#include "support/op_cases.h"
#include "support/stablehlo_roundtrip.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/recipes/fmnist.h"

using namespace tlaloc;
using namespace tlaloc::ir;

TEST(StablehloRoundTrip, EveryOpEmitParseRunEqualsOriginal) {
  auto all = tlaloc::testing::op_cases();
  for (Op op : kAllOps) {
    if (op == Op::parameter) continue;  // every case has parameters
    SCOPED_TRACE(std::string(op_name(op)));
    ASSERT_TRUE(all.count(op) && !all[op].empty()) << "no round-trip case for " << op_name(op);
    uint64_t seed = 1;
    for (const Function& f : all[op]) {
      auto in = tlaloc::testing::sample_inputs(f, seed++);
      tlaloc::testing::expect_stablehlo_roundtrip(f, in);
    }
  }
}

TEST(StablehloRoundTrip, TrainStepShapeWithAliasesAndNames) {
  // A small SGD step on a linear model: loss = mean((x w + b - y)^2), w' = w - lr * dL/dw.
  Builder b("linear_step");
  auto x = b.parameter({DType::f32, {8, 3}}, "x");
  auto y = b.parameter({DType::f32, {8, 1}}, "y");
  auto w = b.parameter({DType::f32, {3, 1}}, "0.weight");
  auto lr = b.parameter({DType::f32, {}}, "lr");
  auto pred = b.dot_general(x, w, {{}, {}, {1}, {0}});
  auto err = b.binary(Op::subtract, pred, y);
  auto loss =
      b.binary(Op::divide, b.reduce(b.binary(Op::multiply, err, err), ReduceKind::sum, {0, 1}),
               b.scalar(DType::f32, 8));
  auto two_over_n = b.broadcast_in_dim(b.scalar(DType::f32, 0.25), {8, 1}, {});
  auto gw = b.dot_general(x, b.binary(Op::multiply, err, two_over_n), {{}, {}, {0}, {0}});
  auto w2 =
      b.binary(Op::subtract, w, b.binary(Op::multiply, b.broadcast_in_dim(lr, {3, 1}, {}), gw));
  Function f = b.build({loss, w2}, {"loss", "0.weight"});
  f.aliases.push_back({1, 2});
  auto in = tlaloc::testing::sample_inputs(f, 7);
  std::string text = tlaloc::testing::expect_stablehlo_roundtrip(f, in);
  EXPECT_NE(text.find("%arg2: tensor<3x1xf32> {tf.aliasing_output = 1 : i32, tlaloc.name = "
                      "\"0.weight\"}"),
            std::string::npos)
      << text;
}

// The recipes' whole train steps (forward, gradient, optimizer update, donated state).
TEST(StablehloRoundTrip, DiscAndFmnistTrainSteps) {
  for (const ir::Function& f : {tlaloc::recipes::disc::train_step(64).fn,
                                tlaloc::recipes::fmnist::train_step(96, 16, {32}).fn}) {
    SCOPED_TRACE(f.name);
    EXPECT_FALSE(f.aliases.empty());
    auto in = tlaloc::testing::sample_inputs(f, 3);
    tlaloc::testing::expect_stablehlo_roundtrip(f, in);
  }
}

// Hostile for the simplification after expansion: a program with a composite whose outputs
// simplify away to an input (x + 0), the same value twice, an unused input and a donated
// input returned as it is; the signature, names and aliases survive.
TEST(StablehloRoundTrip, SimplifiedAfterExpansionKeepsTheSignature) {
  Builder b("hostile");
  auto x = b.parameter({DType::f32, {2, 3}}, "x");
  auto unused = b.parameter({DType::f32, {4}}, "unused");
  auto w = b.parameter({DType::f32, {2, 3}}, "w");
  auto g = b.composite(Op::gelu, {x})[0];
  auto zero = b.broadcast_in_dim(b.scalar(DType::f32, 0), {2, 3}, {});
  auto same = b.binary(Op::add, w, zero);  // simplifies to w itself
  auto pad_a = b.pad(b.slice(g, {0, 0}, {2, 1}), b.scalar(DType::f32, 0), {0, 0}, {0, 2});
  auto pad_b = b.pad(b.slice(g, {0, 1}, {2, 3}), b.scalar(DType::f32, 0), {0, 1}, {0, 0});
  auto sum = b.binary(Op::add, pad_a, pad_b);  // pads side by side: a concatenation of g
  Function f = b.build({g, g, same, sum, x}, {"g", "g2", "w", "sum", "x"});
  f.aliases.push_back({2, 2});
  (void)unused;
  auto in = tlaloc::testing::sample_inputs(f, 5);
  tlaloc::testing::expect_stablehlo_roundtrip(f, in);
}
