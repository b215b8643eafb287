// merge_forward_into_grad (in simplify): a cross-entropy loss whose cotangent is fixed reads its
// value from cross_entropy_grad's second result; the values against hand computations.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/composite_ops.h"
#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/passes.h"

using namespace tlaloc;
using namespace tlaloc::ir;

namespace {

int count(const Function& f, Op op) {
  int n = 0;
  for (auto& nd : f.nodes) n += nd.op == op;
  return n;
}

// loss(x [2, 2], labels [2], w [2]) with rows = cross_entropy(x, labels).
enum class Reduce { mean, weighted_mean, sum_of_squares };

Function loss_fn(Reduce r) {
  Builder b("loss");
  auto x = b.parameter({DType::f64, {2, 2}}, "x");
  auto l = b.parameter({DType::s32, {2}}, "labels");
  auto w = b.parameter({DType::f64, {2}}, "w");
  auto rows = cop::cross_entropy(b, x, l);
  const auto all = std::vector<int64_t>{0};
  ValueId loss;
  if (r == Reduce::mean) {
    loss = b.binary(Op::divide, b.reduce(rows, ReduceKind::sum, all),
                    b.constant(Array::from_doubles(DType::f64, {}, {2.0})));
  } else if (r == Reduce::weighted_mean) {
    loss = b.binary(Op::divide, b.reduce(b.binary(Op::multiply, rows, w), ReduceKind::sum, all),
                    b.reduce(w, ReduceKind::sum, all));
  } else {
    loss = b.reduce(b.binary(Op::multiply, rows, rows), ReduceKind::sum, all);
  }
  return b.build({loss}, {"loss"});
}

// Logits [[0, ln 3], [ln 3, 0]], both labels 1: softmax rows [1/4, 3/4] and [3/4, 1/4], losses
// ln(4/3) and ln 4.
std::vector<Array> inputs(double w0, double w1) {
  const double l3 = std::log(3.0);
  return {Array::from_doubles(DType::f64, {2, 2}, {0, l3, l3, 0}),
          Array::from(Shape{2}, std::vector<int32_t>{1, 1}),
          Array::from_doubles(DType::f64, {2}, {w0, w1})};
}

void expect_near(const Array& a, const std::vector<double>& want) {
  ASSERT_EQ(a.numel(), int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(a.to_doubles()[i], want[i], 1e-14) << i;
}

}  // namespace

TEST(MergeForwardIntoGrad, MeanLossReadsTheGradientsLoss) {
  Function g = passes::simplify(autodiff::value_and_grad(loss_fn(Reduce::mean), {0}));
  EXPECT_EQ(count(g, Op::cross_entropy), 0);
  EXPECT_EQ(count(g, Op::cross_entropy_grad), 1);
  std::vector<Array> out = passes::interpret(g, inputs(1, 1));
  const double a = std::log(4.0 / 3), b = std::log(4.0);
  expect_near(out[0], {(a + b) / 2});
  // d mean / dx = (softmax - one_hot) / 2 per row.
  expect_near(out[1], {0.25 / 2, -0.25 / 2, 0.75 / 2, -0.75 / 2});
}

TEST(MergeForwardIntoGrad, WeightedMeanToo) {
  Function g = passes::simplify(autodiff::value_and_grad(loss_fn(Reduce::weighted_mean), {0}));
  EXPECT_EQ(count(g, Op::cross_entropy), 0);
  std::vector<Array> out = passes::interpret(g, inputs(1, 3));
  const double a = std::log(4.0 / 3), b = std::log(4.0);
  expect_near(out[0], {(a + 3 * b) / 4});
  expect_near(out[1], {0.25 / 4, -0.25 / 4, 3 * 0.75 / 4, -3 * 0.75 / 4});
}

// Σ loss²: the cotangent 2·loss reads the forward, so the forward node stays.
TEST(MergeForwardIntoGrad, ACotangentThatReadsTheLossKeepsTheForward) {
  Function g = passes::simplify(autodiff::value_and_grad(loss_fn(Reduce::sum_of_squares), {0}));
  EXPECT_EQ(count(g, Op::cross_entropy), 1);
  EXPECT_EQ(count(g, Op::cross_entropy_grad), 1);
  std::vector<Array> out = passes::interpret(g, inputs(1, 1));
  const double a = std::log(4.0 / 3), b = std::log(4.0);
  expect_near(out[0], {a * a + b * b});
  expect_near(out[1], {2 * a * 0.25, -2 * a * 0.25, 2 * b * 0.75, -2 * b * 0.75});
}

// The forward's other readers (here an extra output of the rows) read the gradient's result,
// which moves up before them.
TEST(MergeForwardIntoGrad, OtherReadersOfTheForwardFollowIt) {
  Builder b("loss");
  auto x = b.parameter({DType::f64, {2, 2}}, "x");
  auto l = b.parameter({DType::s32, {2}}, "labels");
  b.parameter({DType::f64, {2}}, "w");
  auto rows = cop::cross_entropy(b, x, l);
  auto doubled = b.binary(Op::add, rows, rows);
  auto loss = b.reduce(rows, ReduceKind::sum, {0});
  Function f = b.build({loss, doubled}, {"loss", "doubled"});
  Function g = passes::simplify(autodiff::value_and_grad(f, {0}));
  EXPECT_EQ(count(g, Op::cross_entropy), 0);
  std::vector<Array> out = passes::interpret(g, inputs(1, 1));
  const double a = std::log(4.0 / 3), c = std::log(4.0);
  expect_near(out[0], {a + c});
  expect_near(out[1], {2 * a, 2 * c});
  expect_near(out[2], {0.25, -0.25, 0.75, -0.75});
}
