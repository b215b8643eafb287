// The reference evaluator that constant folding relies on: every op of ir::kAllOps has a case
// with hand-computed expected values (StableHLO semantics, edge cases included).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <type_traits>

#include "tests/support/composite_ops.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using namespace tlaloc::ir;

namespace {

// Builds a case's outputs: one value, or every result of a multi-result composite.
struct Build {
  std::function<std::vector<ValueId>(Builder&, std::vector<ValueId>)> f;
  template <class F>
  Build(F fn)  // NOLINT: implicit, so cases list plain lambdas
      : f([fn](Builder& b, std::vector<ValueId> v) {
          auto r = fn(b, v);
          if constexpr (std::is_same_v<decltype(r), ValueId>)
            return std::vector<ValueId>{r};
          else
            return r;
        }) {}
};

struct Case {
  std::string label;
  Build build;
  std::vector<Array> in;
  std::vector<double> expected;
};

Array F(Shape s, std::vector<double> v) { return Array::from_doubles(DType::f64, std::move(s), v); }
Array S(Shape s, std::vector<int32_t> v) { return Array::from(std::move(s), v); }
Array U(Shape s, std::vector<uint32_t> v) { return Array::from(std::move(s), v); }
Array P(Shape s, std::vector<bool> v) { return Array::from(std::move(s), v); }

Case un(Op op, Array x, std::vector<double> e) {
  return {std::string(op_name(op)),
          [op](Builder& b, auto v) { return b.unary(op, v[0]); },
          {std::move(x)},
          std::move(e)};
}
Case bin(Op op, Array x, Array y, std::vector<double> e) {
  return {std::string(op_name(op)),
          [op](Builder& b, auto v) { return b.binary(op, v[0], v[1]); },
          {std::move(x), std::move(y)},
          std::move(e)};
}

std::multimap<Op, Case> cases() {
  std::multimap<Op, Case> m;
  auto add = [&](Op op, Case c) { m.emplace(op, std::move(c)); };
  const double big = 3e9, nan = std::nan("");
  add(Op::parameter, {"identity", [](Builder&, auto v) { return v[0]; }, {F({2}, {1, 2})}, {1, 2}});
  add(Op::constant, {"constant",
                     [](Builder& b, auto) {
                       return b.constant(S({2}, {4, -5}));
                     },
                     {},
                     {4, -5}});
  add(Op::iota, {"dim 1",
                 [](Builder& b, auto) {
                   return b.iota({DType::s32, {2, 3}}, 1);
                 },
                 {},
                 {0, 1, 2, 0, 1, 2}});
  add(Op::convert, {"f64->s32 truncates, saturates, NaN->0",
                    [](Builder& b, auto v) { return b.convert(v[0], DType::s32); },
                    {F({5}, {-1.7, 2.9, big, -big, nan})},
                    {-1, 2, 2147483647.0, -2147483648.0, 0}});
  add(Op::convert,
      {"f64->u32 and ->i1",
       [](Builder& b, auto v) { return b.convert(b.convert(v[0], DType::u32), DType::i1); },
       {F({3}, {-4, 0.5, 7})},
       {0, 0, 1}});
  add(Op::broadcast_in_dim, {"[2,1]->[2,3,2] dims 2,1",
                             [](Builder& b, auto v) {
                               return b.broadcast_in_dim(v[0], {2, 3, 2}, {2, 1});
                             },
                             {F({2, 1}, {1, 2})},
                             {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}});
  add(Op::reshape, {"[2,2]->[4]",
                    [](Builder& b, auto v) { return b.reshape(v[0], {4}); },
                    {F({2, 2}, {1, 2, 3, 4})},
                    {1, 2, 3, 4}});
  add(Op::transpose, {"[2,3] perm 1,0",
                      [](Builder& b, auto v) {
                        return b.transpose(v[0], {1, 0});
                      },
                      {F({2, 3}, {1, 2, 3, 4, 5, 6})},
                      {1, 4, 2, 5, 3, 6}});
  add(Op::slice, {"strided",
                  [](Builder& b, auto v) { return b.slice(v[0], {1}, {6}, {2}); },
                  {F({6}, {0, 1, 2, 3, 4, 5})},
                  {1, 3, 5}});
  add(Op::concatenate, {"dim 0",
                        [](Builder& b, auto v) {
                          return b.concatenate({v[0], v[1]}, 0);
                        },
                        {F({1, 2}, {1, 2}), F({2, 2}, {3, 4, 5, 6})},
                        {1, 2, 3, 4, 5, 6}});
  add(Op::pad, {"low 1 high 2 interior 1",
                [](Builder& b, auto v) { return b.pad(v[0], v[1], {1}, {2}, {1}); },
                {F({3}, {1, 2, 3}), F({}, {9})},
                {9, 1, 9, 2, 9, 3, 9, 9}});
  add(Op::dynamic_slice, {"start clamped",
                          [](Builder& b, auto v) { return b.dynamic_slice(v[0], {v[1]}, {2}); },
                          {F({4}, {1, 2, 3, 4}), S({}, {7})},
                          {3, 4}});
  add(Op::dynamic_update_slice,
      {"negative start clamped to 0",
       [](Builder& b, auto v) { return b.dynamic_update_slice(v[0], v[1], {v[2]}); },
       {F({4}, {1, 2, 3, 4}), F({2}, {8, 9}), S({}, {-3})},
       {8, 9, 3, 4}});
  add(Op::gather, {"rows clamped",
                   [](Builder& b, auto v) { return b.gather(v[0], v[1]); },
                   {F({3, 2}, {1, 2, 3, 4, 5, 6}), S({3}, {2, -1, 9})},
                   {5, 6, 1, 2, 5, 6}});
  add(Op::scatter, {"duplicates add, out of range skipped",
                    [](Builder& b, auto v) { return b.scatter(v[0], v[1], v[2]); },
                    {F({3, 1}, {1, 1, 1}), S({3}, {0, 0, 3}), F({3, 1}, {10, 20, 30})},
                    {31, 1, 1}});
  add(Op::dot_general, {"batched [2,1,2]x[2,2,1]",
                        [](Builder& b, auto v) {
                          return b.dot_general(v[0], v[1], {{0}, {0}, {2}, {1}});
                        },
                        {F({2, 1, 2}, {1, 2, 3, 4}), F({2, 2, 1}, {5, 6, 7, 8})},
                        {1 * 5 + 2 * 6, 3 * 7 + 4 * 8}});
  add(Op::reduce, {"sum over 1",
                   [](Builder& b, auto v) { return b.reduce(v[0], ReduceKind::sum, {1}); },
                   {F({2, 3}, {1, 2, 3, 4, 5, 6})},
                   {6, 15}});
  add(Op::reduce, {"max over 0 (NaN propagates)",
                   [](Builder& b, auto v) { return b.reduce(v[0], ReduceKind::max, {0}); },
                   {F({2, 2}, {1, nan, 3, 2})},
                   {3, nan}});
  add(Op::reduce, {"min s32 over all",
                   [](Builder& b, auto v) { return b.reduce(v[0], ReduceKind::min, {0}); },
                   {S({3}, {4, -7, 2})},
                   {-7}});
  add(Op::convolution, {"padding (1, 0): windows 0 1 | 1 2 | 2 3",
                        [](Builder& b, auto v) {
                          ConvOptions o;
                          o.padding = {{1, 0}};
                          return b.convolution(v[0], v[1], o);
                        },
                        {F({1, 1, 3}, {1, 2, 3}), F({1, 1, 2}, {1, 10})},
                        {10, 21, 32}});
  add(Op::convolution, {"lhs_dilation 2: 1 0 2 0 3",
                        [](Builder& b, auto v) {
                          ConvOptions o;
                          o.lhs_dilation = {2};
                          return b.convolution(v[0], v[1], o);
                        },
                        {F({1, 1, 3}, {1, 2, 3}), F({1, 1, 2}, {1, 10})},
                        {1, 20, 2, 30}});
  add(Op::convolution, {"2 batch groups: feature o reads batch o",
                        [](Builder& b, auto v) {
                          ConvOptions o;
                          o.batch_group_count = 2;
                          return b.convolution(v[0], v[1], o);
                        },
                        {F({2, 1, 2}, {1, 2, 3, 4}), F({2, 1, 1}, {10, 100})},
                        {10, 20, 300, 400}});
  add(Op::convolution, {"stride 2, negative high padding, 2 feature groups",
                        [](Builder& b, auto v) {
                          ConvOptions o;
                          o.window_strides = {2};
                          o.padding = {{0, -1}};
                          o.feature_group_count = 2;
                          return b.convolution(v[0], v[1], o);
                        },
                        {F({1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50}), F({2, 1, 1}, {1, -1})},
                        {1, 3, -10, -30}});
  add(Op::reverse, {"dims 1",
                    [](Builder& b, auto v) { return b.reverse(v[0], {1}); },
                    {F({2, 3}, {1, 2, 3, 4, 5, 6})},
                    {3, 2, 1, 6, 5, 4}});
  // The StableHLO spec's examples (reduce_window's in f32 rather than i64).
  add(Op::reduce_window, {"spec example: dilations, padding, strides",
                          [](Builder& b, auto v) {
                            return b.reduce_window(v[0], ReduceKind::sum, {2, 1}, {4, 1}, {2, 0},
                                                   {1, 0}, {2, 1}, {3, 1});
                          },
                          {F({3, 2}, {1, 2, 3, 4, 5, 6})},
                          {0, 0, 3, 4}});
  add(Op::reduce_window, {"max 2 stride 1, a padded window",
                          [](Builder& b, auto v) {
                            return b.reduce_window(v[0], ReduceKind::max, {2}, {1}, {0}, {1});
                          },
                          {F({3}, {1, 4, 2})},
                          {4, 4, 2}});
  add(Op::select_and_scatter,
      {"spec example",
       [](Builder& b, auto v) {
         return b.select_and_scatter(v[0], v[1], Comparison::GE, {3, 1}, {2, 1}, {0, 0}, {1, 0});
       },
       {F({4, 2}, {1, 5, 2, 5, 3, 6, 4, 4}), F({2, 2}, {5, 6, 7, 8})},
       {0, 0, 0, 0, 5, 14, 7, 0}});
  // Collectives over one replica (this test runs as one process): the operand itself.
  add(Op::all_reduce,
      {"sum over {{0}}",
       [](Builder& b, auto v) { return b.all_reduce(v[0], ReduceKind::sum, {{0}}); },
       {F({2, 2}, {1.5, -2, NAN, 4})},
       {1.5, -2, NAN, 4}});
  add(Op::all_reduce, {"s32 max over groups of one",
                       [](Builder& b, auto v) {
                         return b.all_reduce(v[0], ReduceKind::max, {{0}, {1}, {2}});
                       },
                       {S({3}, {INT32_MIN, 0, 7})},
                       {INT32_MIN, 0, 7}});
  add(Op::all_gather, {"dimension 1 over all_replicas(1)",
                       [](Builder& b, auto v) { return b.all_gather(v[0], 1, all_replicas(1)); },
                       {F({2, 3}, {1, 2, 3, 4, 5, 6})},
                       {1, 2, 3, 4, 5, 6}});
  add(Op::negate, un(Op::negate, S({2}, {INT32_MIN, 3}), {INT32_MIN, -3}));
  add(Op::abs, un(Op::abs, F({2}, {-2.5, 0}), {2.5, 0}));
  add(Op::exponential, un(Op::exponential, F({1}, {1}), {std::exp(1.0)}));
  add(Op::log, un(Op::log, F({2}, {1, 0}), {0, -INFINITY}));
  add(Op::log_plus_one, un(Op::log_plus_one, F({1}, {1e-20}), {1e-20}));
  add(Op::tanh, un(Op::tanh, F({1}, {0.5}), {std::tanh(0.5)}));
  add(Op::logistic, un(Op::logistic, F({1}, {0}), {0.5}));
  add(Op::sqrt, un(Op::sqrt, F({1}, {2.25}), {1.5}));
  add(Op::rsqrt, un(Op::rsqrt, F({1}, {0.25}), {2}));
  add(Op::sign, un(Op::sign, S({3}, {-4, 0, 9}), {-1, 0, 1}));
  add(Op::floor, un(Op::floor, F({2}, {-1.5, 2.5}), {-2, 2}));
  add(Op::cosine, un(Op::cosine, F({3}, {0, M_PI, 1}), {1, -1, std::cos(1.0)}));
  add(Op::sine, un(Op::sine, F({3}, {0, M_PI / 2, -1}), {0, 1, std::sin(-1.0)}));
  add(Op::add, bin(Op::add, S({1}, {INT32_MAX}), S({1}, {1}), {INT32_MIN}));  // wraps
  add(Op::subtract, bin(Op::subtract, U({1}, {0}), U({1}, {1}), {4294967295.0}));
  add(Op::multiply, bin(Op::multiply, S({1}, {65536}), S({1}, {65536}), {0}));
  add(Op::divide, bin(Op::divide, S({3}, {7, -7, 5}), S({3}, {2, 2, 0}), {3, -3, -1}));
  add(Op::divide, bin(Op::divide, F({1}, {1}), F({1}, {4}), {0.25}));
  add(Op::maximum, bin(Op::maximum, F({2}, {1, nan}), F({2}, {2, 0}), {2, nan}));
  add(Op::minimum, bin(Op::minimum, F({2}, {1, 5}), F({2}, {2, 0}), {1, 0}));
  add(Op::power, bin(Op::power, F({2}, {2, 9}), F({2}, {10, 0.5}), {1024, 3}));
  add(Op::remainder, bin(Op::remainder, F({2}, {-7.5, 7.5}), F({2}, {2, -2}), {-1.5, 1.5}));
  add(Op::remainder, bin(Op::remainder, S({3}, {-7, 7, 5}), S({3}, {2, -2, 0}), {-1, 1, 5}));
  add(Op::and_, bin(Op::and_, P({2}, {true, true}), P({2}, {true, false}), {1, 0}));
  add(Op::or_, bin(Op::or_, U({1}, {0xF0}), U({1}, {0x0F}), {255}));
  add(Op::xor_, bin(Op::xor_, S({1}, {-1}), S({1}, {1}), {-2}));
  add(Op::shift_left,
      bin(Op::shift_left, U({3}, {1, 1, 3}), U({3}, {31, 32, 1}), {2147483648.0, 0, 6}));
  add(Op::shift_right_logical,
      bin(Op::shift_right_logical, S({2}, {-1, 8}), S({2}, {28, 40}), {15, 0}));
  add(Op::compare, {"LT with NaN",
                    [](Builder& b, auto v) { return b.compare(v[0], v[1], Comparison::LT); },
                    {F({3}, {1, 2, nan}), F({3}, {2, 2, 1})},
                    {1, 0, 0}});
  add(Op::compare, {"NE with NaN",
                    [](Builder& b, auto v) { return b.compare(v[0], v[1], Comparison::NE); },
                    {F({2}, {nan, 1}), F({2}, {nan, 1})},
                    {1, 0}});
  add(Op::select, {"scalar pred",
                   [](Builder& b, auto v) { return b.select(v[0], v[1], v[2]); },
                   {P({}, {false}), F({2}, {1, 2}), F({2}, {3, 4})},
                   {3, 4}});
  add(Op::clamp, {"scalar bounds",
                  [](Builder& b, auto v) { return b.clamp(v[0], v[1], v[2]); },
                  {F({}, {0}), F({3}, {-1, 0.5, 3}), F({}, {1})},
                  {0, 0.5, 1}});
  auto D = [](Shape s, std::vector<double> v) { return Array::from_doubles(DType::f64, s, v); };
  // Batch 0: equal scores, so out = (2 + 4) / 2 and lse = log(e^0 + e^0); batch 1: no visible key.
  add(Op::attention,
      {"two keys; masked row",
       [](Builder& b, auto v) { return cop::attention(b, v[0], v[1], v[2], v[3], 1, false); },
       {D({2, 1, 1, 1}, {1, 1}), D({2, 1, 2, 1}, {0, 0, 0, 0}), D({2, 1, 2, 1}, {2, 4, 2, 4}),
        P({2, 2}, {true, true, false, false})},
       {3, 0, std::log(2.0), -INFINITY}});
  // One key: s = scale q k = 3 = lse, p = exp(s - lse) = 1; ds = p (do·v - do·o) = 0.5;
  // dq = scale ds k = 0.75, dk = scale ds q = 0.5, dv = p do = 1.
  add(Op::attention_grad,
      {"one key",
       [](Builder& b, auto v) {
         return cop::attention_grad(b, v[0], v[1], v[2], v[3], v[4], v[5], -1, 0.5, false);
       },
       {D({1, 1, 1, 1}, {2}), D({1, 1, 1, 1}, {3}), D({1, 1, 1, 1}, {5}), D({1, 1, 1, 1}, {4.5}),
        D({1, 1, 1}, {3}), D({1, 1, 1, 1}, {1})},
       {0.75, 0.5, 1}});
  // Rows [1, 3] and [10, 4]: xhat = [-1, 1] and [1, -1]; y = xhat·[2, 1] + [0.5, -1].
  add(Op::layer_norm, {"two rows",
                       [](Builder& b, auto v) { return cop::layer_norm(b, v[0], v[1], v[2], 0); },
                       {D({2, 2}, {1, 3, 10, 4}), D({2}, {2, 1}), D({2}, {0.5, -1})},
                       {-1.5, 0, 2.5, -2}});
  // Row [0, 0, 2, 2]: var 1, xhat = [-1, -1, 1, 1]; g = d_y·w = [1, 2, 3, 4], mean 2.5,
  // mean(g·xhat) = 1: d_x = (g - 2.5) - xhat; d_w = xhat; d_b = d_y.
  add(Op::layer_norm_grad,
      {"one row",
       [](Builder& b, auto v) { return cop::layer_norm_grad(b, v[0], v[1], v[2], 0); },
       {D({1, 4}, {0, 0, 2, 2}), D({4}, {1, 2, 3, 4}), D({1, 4}, {1, 1, 1, 1})},
       {-0.5, 0.5, -0.5, 0.5, -1, -1, 1, 1, 1, 1, 1, 1}});
  // Rows [0, 0] (label 1: log 2) and [ln 3, 0] (label 0: log(4/3) = 2 ln 2 - ln 3); labels
  // outside [0, C) give -0.
  auto S = [](Shape s, std::vector<int32_t> v) { return Array::from(s, v); };
  const double l3 = std::log(3.0);
  add(Op::cross_entropy, {"two rows, one label out of range",
                          [](Builder& b, auto v) { return cop::cross_entropy(b, v[0], v[1]); },
                          {D({3, 2}, {0, 0, l3, 0, 0, 0}), S({3}, {1, 0, 2})},
                          {std::log(2.0), std::log(4.0 / 3), -0.0}});
  // softmax([0, 0]) = [1/2, 1/2]; d_loss 2, label 0: 2·([1/2, 1/2] - [1, 0]).
  add(Op::cross_entropy_grad,
      {"one row",
       [](Builder& b, auto v) { return cop::cross_entropy_grad(b, v[0], v[1], v[2]); },
       {D({1, 2}, {0, 0}), S({1}, {0}), D({1}, {2})},
       {-1, 1}});
  // GELU's tanh form at x = 1, -1, 0: 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) worked in double.
  add(Op::gelu, {"x = 1, -1, 0",
                 [](Builder& b, auto v) { return cop::gelu(b, v[0]); },
                 {D({3}, {1, -1, 0})},
                 {0.8411919906082768, -0.15880800939172324, 0}});
  // gelu_grad at q = 1 + t = 2y / x of 2 (t = 1: derivative 1), 0 (t = -1: 0) and, for
  // |x| < 2^-60, 1 (0.5 + 0.5x·du rounds to 0.5); times d_y = [1, 2, 4].
  add(Op::gelu_grad, {"t = 1, t = -1, tiny x",
                      [](Builder& b, auto v) { return cop::gelu_grad(b, v[0], v[1], v[2]); },
                      {D({3}, {3, -3, 1e-20}), D({3}, {3, 0, 5e-21}), D({3}, {1, 2, 4})},
                      {1, 0, 2}});
  return m;
}

// Runs every case with `run` and compares with the hand values.
void check_all(
    const std::function<std::vector<Array>(const Function&, const std::vector<Array>&)>& run) {
  auto table = cases();
  // Composites evaluate their decomposition (ir/composite.h), which the record-walking tests
  // check; the hand cases here cover those that have one. Result nodes come with the
  // multi-result composites' cases.
  for (Op op : kAllOps) {
    if (is_composite(op) || op == Op::result) continue;
    EXPECT_TRUE(table.count(op) > 0) << op_name(op) << " has no case";
  }
  for (auto& [op, c] : table) {
    SCOPED_TRACE(std::string(op_name(op)) + ": " + c.label);
    Builder b;
    std::vector<ValueId> params;
    for (auto& a : c.in) params.push_back(b.parameter({a.dtype(), a.shape()}));
    Function f = b.build(c.build.f(b, params));
    std::vector<double> out;
    for (const Array& r : run(f, c.in))
      for (double x : r.to_doubles()) out.push_back(x);
    ASSERT_EQ(out.size(), c.expected.size());
    for (size_t i = 0; i < out.size(); ++i) {
      if (std::isnan(c.expected[i]))
        EXPECT_TRUE(std::isnan(out[i])) << i;
      else
        EXPECT_EQ(out[i], c.expected[i]) << i;
    }
  }
}

}  // namespace

TEST(Evaluate, EveryOpAgainstHandValues) {
  check_all(
      [](const Function& f, const std::vector<Array>& in) { return passes::interpret(f, in); });
}

// Folding must not change a program's results on the host lane: the same edge cases there.
TEST(Evaluate, HostLaneAgreesOnTheSameCases) {
  check_all([](const Function& f, const std::vector<Array>& in) {
    return runtime::host::compile(f)->run(in);
  });
}

TEST(Evaluate, RejectsWrongInputs) {
  Builder b;
  auto x = b.parameter({DType::f32, {2}});
  Function f = b.build({b.unary(Op::negate, x)});
  try {
    passes::interpret(f, std::vector<Array>{Array(DType::f64, {2})});
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("f64[2]"), std::string::npos) << m;
    EXPECT_NE(m.find("f32[2]"), std::string::npos) << m;
  }
  EXPECT_THROW(passes::interpret(f, std::vector<Array>{}), Error);
}
