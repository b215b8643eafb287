// Golden-text tests for StableHLO emission: one hand-written expected text per op.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <functional>
#include <map>

#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/stablehlo/emit.h"

using namespace tlaloc;
using namespace tlaloc::ir;
namespace shlo = tlaloc::stablehlo;

namespace {

// The lines between the func.func header and func.return, without indentation.
std::string body(const std::string& text) {
  std::string out;
  size_t start = text.find('\n', text.find("func.func")) + 1;
  for (size_t p = start; p < text.size();) {
    size_t nl = text.find('\n', p);
    size_t b = text.find_first_not_of(' ', p);
    if (text.compare(b, 13, "\"func.return\"") == 0) break;
    out += text.substr(b, nl + 1 - b);
    p = nl + 1;
  }
  return out;
}

struct Golden {
  std::function<Function()> build;
  std::string body;  // expected body lines
};

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

Function unary_fn(Op op, DType t) {
  Builder b;
  auto x = b.parameter({t, {3}});
  return b.build({b.unary(op, x)});
}
Function binary_fn(Op op, DType t) {
  Builder b;
  auto x = b.parameter({t, {3}});
  auto y = b.parameter({t, {3}});
  return b.build({b.binary(op, x, y)});
}

std::string un(const char* op) {
  return fmt::format("%0 = \"stablehlo.{}\"(%arg0) : (tensor<3xf32>) -> tensor<3xf32>\n", op);
}
std::string bin(const char* op, const char* t) {
  return fmt::format(
      "%0 = \"stablehlo.{0}\"(%arg0, %arg1) : (tensor<3x{1}>, tensor<3x{1}>) -> tensor<3x{1}>\n",
      op, t);
}

// Every op of ops.def except parameter (covered by the header tests) has a case here.
std::map<Op, Golden> goldens() {
  std::map<Op, Golden> g;
  for (auto [op, nm] : {std::pair{Op::negate, "negate"},
                        {Op::abs, "abs"},
                        {Op::exponential, "exponential"},
                        {Op::log, "log"},
                        {Op::log_plus_one, "log_plus_one"},
                        {Op::tanh, "tanh"},
                        {Op::logistic, "logistic"},
                        {Op::sqrt, "sqrt"},
                        {Op::rsqrt, "rsqrt"},
                        {Op::sign, "sign"},
                        {Op::floor, "floor"},
                        {Op::cosine, "cosine"},
                        {Op::sine, "sine"}})
    g[op] = {[op] { return unary_fn(op, DType::f32); }, un(nm)};
  for (auto [op, nm] : {std::pair{Op::add, "add"},
                        {Op::subtract, "subtract"},
                        {Op::multiply, "multiply"},
                        {Op::divide, "divide"},
                        {Op::maximum, "maximum"},
                        {Op::minimum, "minimum"},
                        {Op::power, "power"},
                        {Op::remainder, "remainder"}})
    g[op] = {[op] { return binary_fn(op, DType::f32); }, bin(nm, "f32")};
  for (auto [op, nm] : {std::pair{Op::and_, "and"},
                        {Op::or_, "or"},
                        {Op::xor_, "xor"},
                        {Op::shift_left, "shift_left"},
                        {Op::shift_right_logical, "shift_right_logical"}})
    g[op] = {[op] { return binary_fn(op, DType::u32); }, bin(nm, "ui32")};

  g[Op::constant] = {
      [] {
        Builder b;
        return b.build({b.constant(Array::from<float>({2, 2}, {1.5f, -2, 0.1f, 0}))});
      },
      "%0 = \"stablehlo.constant\"() <{value = dense<[[1.50000000e+00, "
      "-2.00000000e+00], [1.00000001e-01, 0.00000000e+00]]> : tensor<2x2xf32>}> : "
      "() -> tensor<2x2xf32>\n"};
  g[Op::iota] = {[] {
                   Builder b;
                   return b.build({b.iota({DType::s32, {2, 4}}, 1)});
                 },
                 "%0 = \"stablehlo.iota\"() <{iota_dimension = 1 : i64}> : () -> "
                 "tensor<2x4xi32>\n"};
  g[Op::convert] = {[] {
                      Builder b;
                      auto x = b.parameter({DType::s32, {3}});
                      return b.build({b.convert(x, DType::bf16)});
                    },
                    "%0 = \"stablehlo.convert\"(%arg0) : (tensor<3xi32>) -> tensor<3xbf16>\n"};
  g[Op::broadcast_in_dim] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({3}));
        return b.build({b.broadcast_in_dim(x, {2, 3}, {1})});
      },
      "%0 = \"stablehlo.broadcast_in_dim\"(%arg0) <{broadcast_dimensions = array<i64: 1>}> : "
      "(tensor<3xf32>) -> tensor<2x3xf32>\n"};
  g[Op::reshape] = {[] {
                      Builder b;
                      auto x = b.parameter(f32({2, 3}));
                      return b.build({b.reshape(x, {6})});
                    },
                    "%0 = \"stablehlo.reshape\"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>\n"};
  g[Op::transpose] = {[] {
                        Builder b;
                        auto x = b.parameter(f32({2, 3}));
                        return b.build({b.transpose(x, {1, 0})});
                      },
                      "%0 = \"stablehlo.transpose\"(%arg0) <{permutation = array<i64: 1, 0>}> : "
                      "(tensor<2x3xf32>) -> tensor<3x2xf32>\n"};
  g[Op::slice] = {[] {
                    Builder b;
                    auto x = b.parameter(f32({4, 5}));
                    return b.build({b.slice(x, {1, 0}, {3, 5}, {1, 2})});
                  },
                  "%0 = \"stablehlo.slice\"(%arg0) <{start_indices = array<i64: 1, 0>, "
                  "limit_indices = array<i64: 3, 5>, strides = array<i64: 1, 2>}> : "
                  "(tensor<4x5xf32>) -> tensor<2x3xf32>\n"};
  g[Op::concatenate] = {[] {
                          Builder b;
                          auto x = b.parameter(f32({2, 3}));
                          auto y = b.parameter(f32({2, 1}));
                          return b.build({b.concatenate({x, y}, 1)});
                        },
                        "%0 = \"stablehlo.concatenate\"(%arg0, %arg1) <{dimension = 1 : i64}> : "
                        "(tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>\n"};
  g[Op::pad] = {[] {
                  Builder b;
                  auto x = b.parameter(f32({2, 3}));
                  auto v = b.parameter(f32({}));
                  return b.build({b.pad(x, v, {1, 0}, {0, 2}, {0, 1})});
                },
                "%0 = \"stablehlo.pad\"(%arg0, %arg1) <{edge_padding_low = array<i64: 1, 0>, "
                "edge_padding_high = array<i64: 0, 2>, interior_padding = array<i64: 0, 1>}> : "
                "(tensor<2x3xf32>, tensor<f32>) -> tensor<3x7xf32>\n"};
  g[Op::dynamic_slice] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({4, 5}));
        auto i = b.parameter({DType::s32, {}});
        auto j = b.parameter({DType::s32, {}});
        return b.build({b.dynamic_slice(x, {i, j}, {2, 2})});
      },
      "%0 = \"stablehlo.dynamic_slice\"(%arg0, %arg1, %arg2) <{slice_sizes = array<i64: 2, "
      "2>}> : (tensor<4x5xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>\n"};
  g[Op::dynamic_update_slice] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({4, 5}));
        auto u = b.parameter(f32({2, 2}));
        auto i = b.parameter({DType::s32, {}});
        auto j = b.parameter({DType::s32, {}});
        return b.build({b.dynamic_update_slice(x, u, {i, j})});
      },
      "%0 = \"stablehlo.dynamic_update_slice\"(%arg0, %arg1, %arg2, %arg3) : (tensor<4x5xf32>, "
      "tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x5xf32>\n"};
  // Row gather: x [5, 3], indices [2, 4] -> [2, 4, 3]; offset dim 2 is x's dim 1.
  g[Op::gather] = {[] {
                     Builder b;
                     auto x = b.parameter(f32({5, 3}));
                     auto i = b.parameter({DType::s32, {2, 4}});
                     return b.build({b.gather(x, i)});
                   },
                   "%0 = \"stablehlo.gather\"(%arg0, %arg1) <{dimension_numbers = "
                   "#stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], "
                   "start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, "
                   "slice_sizes = array<i64: 1, 3>}> : (tensor<5x3xf32>, tensor<2x4xi32>) -> "
                   "tensor<2x4x3xf32>\n"};
  g[Op::scatter] = {[] {
                      Builder b;
                      auto x = b.parameter(f32({5, 3}));
                      auto i = b.parameter({DType::s32, {4}});
                      auto u = b.parameter(f32({4, 3}));
                      return b.build({b.scatter(x, i, u)});
                    },
                    "%0 = \"stablehlo.scatter\"(%arg0, %arg1, %arg2) <{indices_are_sorted = "
                    "false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
                    "[1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
                    "index_vector_dim = 1>, unique_indices = false}> ({\n"
                    "^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
                    "%red0 = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> "
                    "tensor<f32>\n"
                    "\"stablehlo.return\"(%red0) : (tensor<f32>) -> ()\n"
                    "}) : (tensor<5x3xf32>, tensor<4xi32>, tensor<4x3xf32>) -> tensor<5x3xf32>\n"};
  g[Op::dot_general] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({4, 3, 5}));
        auto y = b.parameter(f32({4, 5, 7}));
        return b.build({b.dot_general(x, y, {{0}, {0}, {2}, {1}})});
      },
      "%0 = \"stablehlo.dot_general\"(%arg0, %arg1) <{dot_dimension_numbers = "
      "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
      "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = "
      "[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x3x5xf32>, "
      "tensor<4x5x7xf32>) -> tensor<4x3x7xf32>\n"};
  g[Op::reduce] = {[] {
                     Builder b;
                     auto x = b.parameter(f32({2, 3}));
                     return b.build({b.reduce(x, ReduceKind::max, {1})});
                   },
                   "%init0 = \"stablehlo.constant\"() <{value = dense<0xFF800000> : "
                   "tensor<f32>}> : () -> tensor<f32>\n"
                   "%0 = \"stablehlo.reduce\"(%arg0, %init0) <{dimensions = array<i64: 1>}> ({\n"
                   "^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
                   "%red0 = \"stablehlo.maximum\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> "
                   "tensor<f32>\n"
                   "\"stablehlo.return\"(%red0) : (tensor<f32>) -> ()\n"
                   "}) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>\n"};
  g[Op::convolution] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({1, 2, 5, 5}));
        auto w = b.parameter(f32({4, 1, 3, 3}));
        ConvOptions o;
        o.window_strides = {2, 1};
        o.padding = {{1, 0}, {-1, 2}};
        o.rhs_dilation = {1, 2};
        o.feature_group_count = 2;
        return b.build({b.convolution(x, w, o)});
      },
      "%0 = \"stablehlo.convolution\"(%arg0, %arg1) <{batch_group_count = 1 : i64, "
      "dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, "
      "feature_group_count = 2 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<[[1, 0], "
      "[-1, 2]]> : tensor<2x2xi64>, precision_config = [#stablehlo<precision DEFAULT>, "
      "#stablehlo<precision DEFAULT>], rhs_dilation = array<i64: 1, 2>, window_strides = "
      "array<i64: 2, 1>}> : (tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x2x2xf32>\n"};
  g[Op::reverse] = {[] {
                      Builder b;
                      auto x = b.parameter(f32({2, 3, 4}));
                      return b.build({b.reverse(x, {0, 2})});
                    },
                    "%0 = \"stablehlo.reverse\"(%arg0) <{dimensions = array<i64: 0, 2>}> : "
                    "(tensor<2x3x4xf32>) -> tensor<2x3x4xf32>\n"};
  // reduce_window as JAX prints max pooling (every attribute printed, padding a [rank, 2] i64
  // tensor), select_and_scatter as JAX prints its gradient: a compare region and an add region.
  g[Op::reduce_window] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({2, 5}));
        return b.build(
            {b.reduce_window(x, ReduceKind::sum, {1, 3}, {1, 2}, {0, 1}, {0, 2}, {1, 1}, {1, 2})});
      },
      "%init0 = \"stablehlo.constant\"() <{value = dense<0.00000000e+00> : tensor<f32>}> : () -> "
      "tensor<f32>\n"
      "%0 = \"stablehlo.reduce_window\"(%arg0, %init0) <{base_dilations = array<i64: 1, 1>, "
      "padding = dense<[[0, 0], [1, 2]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 2>, "
      "window_dimensions = array<i64: 1, 3>, window_strides = array<i64: 1, 2>}> ({\n"
      "^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
      "%red0 = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "\"stablehlo.return\"(%red0) : (tensor<f32>) -> ()\n"
      "}) : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x2xf32>\n"};
  g[Op::select_and_scatter] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({4, 4}));
        auto s = b.parameter(f32({2, 2}));
        return b.build({b.select_and_scatter(x, s, Comparison::GE, {2, 2}, {2, 2})});
      },
      "%init0 = \"stablehlo.constant\"() <{value = dense<0.00000000e+00> : tensor<f32>}> : () -> "
      "tensor<f32>\n"
      "%0 = \"stablehlo.select_and_scatter\"(%arg0, %arg1, %init0) <{padding = dense<[[0, 0], "
      "[0, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 2, 2>, window_strides = "
      "array<i64: 2, 2>}> ({\n"
      "^bb0(%lhs0s: tensor<f32>, %rhs0s: tensor<f32>):\n"
      "%sel0 = \"stablehlo.compare\"(%lhs0s, %rhs0s) <{compare_type = #stablehlo<comparison_type "
      "FLOAT>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<f32>, "
      "tensor<f32>) -> tensor<i1>\n"
      "\"stablehlo.return\"(%sel0) : (tensor<i1>) -> ()\n"
      "}, {\n"
      "^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
      "%red0 = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "\"stablehlo.return\"(%red0) : (tensor<f32>) -> ()\n"
      "}) : (tensor<4x4xf32>, tensor<2x2xf32>, tensor<f32>) -> tensor<4x4xf32>\n"};
  // Collectives as JAX's pmap prints them (cross-replica: no channel_handle), and with a
  // channel (channel_handle, use_global_device_ids).
  g[Op::all_reduce] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({4}));
        return b.build({b.all_reduce(x, ReduceKind::sum, all_replicas(2))});
      },
      "%0 = \"stablehlo.all_reduce\"(%arg0) <{replica_groups = dense<[[0, 1]]> : "
      "tensor<1x2xi64>}> ({\n"
      "^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
      "%red0 = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "\"stablehlo.return\"(%red0) : (tensor<f32>) -> ()\n"
      "}) : (tensor<4xf32>) -> tensor<4xf32>\n"};
  g[Op::all_gather] = {
      [] {
        Builder b;
        auto x = b.parameter(f32({2, 3}));
        Node n{Op::all_gather, {}, {x}, {}};
        n.attrs.dimension = 1;
        n.attrs.replica_groups = {{0, 1}, {2, 3}};
        n.attrs.channel_id = 3;
        return b.build({b.add(n)});
      },
      "%0 = \"stablehlo.all_gather\"(%arg0) <{all_gather_dim = 1 : i64, channel_handle = "
      "#stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> "
      ": tensor<2x2xi64>, use_global_device_ids}> : (tensor<2x3xf32>) -> tensor<2x6xf32>\n"};
  g[Op::compare] = {[] {
                      Builder b;
                      auto x = b.parameter({DType::s32, {3}});
                      auto y = b.parameter({DType::s32, {3}});
                      return b.build({b.compare(x, y, Comparison::LT)});
                    },
                    "%0 = \"stablehlo.compare\"(%arg0, %arg1) <{compare_type = "
                    "#stablehlo<comparison_type SIGNED>, comparison_direction = "
                    "#stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> "
                    "tensor<3xi1>\n"};
  g[Op::select] = {[] {
                     Builder b;
                     auto p = b.parameter({DType::i1, {}});
                     auto x = b.parameter(f32({3}));
                     auto y = b.parameter(f32({3}));
                     return b.build({b.select(p, x, y)});
                   },
                   "%0 = \"stablehlo.select\"(%arg0, %arg1, %arg2) : (tensor<i1>, tensor<3xf32>, "
                   "tensor<3xf32>) -> tensor<3xf32>\n"};
  g[Op::clamp] = {[] {
                    Builder b;
                    auto lo = b.parameter(f32({}));
                    auto x = b.parameter(f32({3}));
                    auto hi = b.parameter(f32({}));
                    return b.build({b.clamp(lo, x, hi)});
                  },
                  "%0 = \"stablehlo.clamp\"(%arg0, %arg1, %arg2) : (tensor<f32>, tensor<3xf32>, "
                  "tensor<f32>) -> tensor<3xf32>\n"};
  return g;
}

}  // namespace

// Composite ops: one function each, with every optional operand and attribute in use.
static std::map<Op, std::function<Function()>> composite_cases() {
  std::map<Op, std::function<Function()>> m;
  auto inputs = [](Builder& b) {
    std::vector<ValueId> v;
    v.push_back(b.parameter(f32({2, 4, 3, 5})));  // q: 4 heads, 3 queries
    v.push_back(b.parameter(f32({2, 2, 6, 5})));  // k: 2 kv heads, 6 keys
    v.push_back(b.parameter(f32({2, 2, 6, 7})));  // v
    return v;
  };
  m[Op::attention] = [inputs] {
    Builder b;
    auto v = inputs(b);
    auto mask = b.parameter({DType::i1, {2, 6}});
    return b.build(cop::attention(b, v[0], v[1], v[2], mask, 0.25, true));
  };
  m[Op::attention_grad] = [inputs] {
    Builder b;
    auto v = inputs(b);
    auto out = b.parameter(f32({2, 4, 3, 7}));
    auto lse = b.parameter(f32({2, 4, 3}));
    auto dout = b.parameter(f32({2, 4, 3, 7}));
    auto mask = b.parameter({DType::i1, {2, 6}});
    return b.build(cop::attention_grad(b, v[0], v[1], v[2], out, lse, dout, mask, 0.25, true));
  };
  m[Op::layer_norm] = [] {
    Builder b;
    auto x = b.parameter(f32({2, 3, 8}));
    auto w = b.parameter(f32({8}));
    auto bias = b.parameter(f32({8}));
    return b.build({cop::layer_norm(b, x, w, bias, 1e-5)});
  };
  m[Op::cross_entropy] = [] {
    Builder b;
    auto x = b.parameter(f32({6, 10}));
    return b.build({cop::cross_entropy(b, x, b.parameter({DType::s32, {6}}))});
  };
  m[Op::cross_entropy_grad] = [] {
    Builder b;
    auto x = b.parameter(f32({6, 10}));
    auto l = b.parameter({DType::s32, {6}});
    return b.build({cop::cross_entropy_grad(b, x, l, b.parameter(f32({6})))});
  };
  m[Op::gelu] = [] {
    Builder b;
    return b.build({cop::gelu(b, b.parameter(f32({2, 5})))});
  };
  m[Op::gelu_grad] = [] {
    Builder b;
    auto x = b.parameter(f32({2, 5}));
    return b.build({cop::gelu_grad(b, x, b.parameter(f32({2, 5})), b.parameter(f32({2, 5})))});
  };
  m[Op::layer_norm_grad] = [] {
    Builder b;
    auto x = b.parameter(f32({2, 3, 8}));
    auto w = b.parameter(f32({8}));
    auto dy = b.parameter(f32({2, 3, 8}));
    return b.build(cop::layer_norm_grad(b, x, w, dy, 1e-5));
  };
  // Any other composite: the instances its record gives (ir/composite.h).
  for (Op op : kAllOps)
    if (is_composite(op) && !m.count(op) && composite(op).examples)
      m[op] = [op] {
        const CompositeExample e = composite(op).examples().front();
        Builder b;
        std::vector<ValueId> ops;
        for (const TensorType& t : e.operands) ops.push_back(b.parameter(t));
        return b.build(b.composite(op, ops, e.attrs.params));
      };
  return m;
}

// A composite prints exactly as its decomposition into plain ops, and only plain ops.
TEST(StablehloEmit, CompositesPrintTheirDecomposition) {
  for (auto& [op, build] : composite_cases()) {
    SCOPED_TRACE(std::string(op_name(op)));
    Function f = build();
    Function plain = tlaloc::passes::expand_composites(f);
    for (const auto& n : plain.nodes) EXPECT_FALSE(is_composite(n.op));
    std::string text = shlo::emit(f);
    EXPECT_EQ(text, shlo::emit(tlaloc::passes::simplify(plain)));
    EXPECT_EQ(text.find("tlaloc."), std::string::npos);
    // An op each decomposition must contain.
    const std::map<Op, const char*> marker = {{Op::attention, "stablehlo.dot_general"},
                                              {Op::attention_grad, "stablehlo.dot_general"},
                                              {Op::cross_entropy, "stablehlo.exponential"},
                                              {Op::cross_entropy_grad, "stablehlo.exponential"},
                                              {Op::gelu, "stablehlo.tanh"},
                                              {Op::gelu_grad, "stablehlo.divide"},
                                              {Op::layer_norm, "stablehlo.rsqrt"},
                                              {Op::layer_norm_grad, "stablehlo.rsqrt"},
                                              {Op::adam_update, "stablehlo.sqrt"},
                                              {Op::sgd_update, "stablehlo.select"}};
    auto it = marker.find(op);
    EXPECT_NE(text.find(it == marker.end() ? "stablehlo." : it->second), std::string::npos);
  }
}

TEST(StablehloEmit, EveryOpHasAGoldenTest) {
  auto g = goldens();
  for (Op op : kAllOps) {
    if (op == Op::parameter) continue;  // function arguments: see ModuleHeader
    if (op == Op::result) continue;     // only composites have several results: expanded
    if (is_composite(op)) {             // see CompositesPrintTheirDecomposition
      EXPECT_TRUE(composite_cases().count(op)) << "no StableHLO test for composite " << op_name(op);
      continue;
    }
    EXPECT_TRUE(g.count(op)) << "no StableHLO golden test for op " << op_name(op);
  }
}

TEST(StablehloEmit, GoldenTextPerOp) {
  for (auto& [op, gold] : goldens()) {
    SCOPED_TRACE(std::string(op_name(op)));
    EXPECT_EQ(body(shlo::emit(gold.build())), gold.body);
  }
}

// A module with collectives runs on their replicas: groups times group size.
TEST(StablehloEmit, ModuleHeaderCountsReplicas) {
  Builder b;
  auto x = b.parameter(f32({4}));
  auto y = b.all_reduce(x, ReduceKind::max, {{0, 1}, {2, 3}, {4, 5}});
  auto z = b.all_gather(x, 0, {{0}});
  const std::string text = shlo::emit(b.build({y, z}));
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "module @main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 6 : i32} "
            "{");
  EXPECT_NE(text.find("replica_groups = dense<[[0]]> : tensor<1x1xi64>"), std::string::npos);
  EXPECT_NE(text.find("%red0 = \"stablehlo.maximum\""), std::string::npos);
}

TEST(StablehloEmit, ModuleHeaderAliasesAndNames) {
  Builder b("train_step");
  auto w = b.parameter(f32({2}), "0.weight");
  auto lr = b.parameter(f32({}), "lr");
  auto y = b.binary(Op::multiply, w, b.broadcast_in_dim(lr, {2}, {}));
  Function f = b.build({y, lr}, {"0.weight", "lr"});
  f.aliases.push_back({0, 0});
  EXPECT_EQ(shlo::emit(f),
            "module @train_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 "
            ": i32} {\n"
            "  func.func public @main(%arg0: tensor<2xf32> {tf.aliasing_output = 0 : i32, "
            "tlaloc.name = \"0.weight\"}, %arg1: tensor<f32> {tlaloc.name = \"lr\"}) -> "
            "(tensor<2xf32> {tlaloc.name = \"0.weight\"}, tensor<f32> {tlaloc.name = \"lr\"}) {\n"
            "    %0 = \"stablehlo.broadcast_in_dim\"(%arg1) <{broadcast_dimensions = array<i64>}> "
            ": (tensor<f32>) -> tensor<2xf32>\n"
            "    %1 = \"stablehlo.multiply\"(%arg0, %0) : (tensor<2xf32>, tensor<2xf32>) -> "
            "tensor<2xf32>\n"
            "    \"func.return\"(%1, %arg1) : (tensor<2xf32>, tensor<f32>) -> ()\n"
            "  }\n"
            "}\n");
  shlo::EmitOptions o;
  o.names = false;
  EXPECT_EQ(shlo::emit(f, o).find("tlaloc.name"), std::string::npos);
}

TEST(StablehloEmit, ConstantsOfEveryDType) {
  auto lit = [](const Array& a) { return shlo::dense_literal(a); };
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(lit(Array::from<float>({2}, {inf, -0.0f})), "dense<[0x7F800000, -0.00000000e+00]>");
  EXPECT_EQ(lit(Array::from<double>({2}, {0.1, 1})),
            "dense<[1.0000000000000001e-01, 1.0000000000000000e+00]>");
  // bf16 1.0 = 0x3F80, -inf = 0xFF80; f16 65504 = 0x7BFF (largest finite), NaN 0x7E00.
  Array bf(DType::bf16, {2}), h(DType::f16, {2});
  bf.data<uint16_t>()[0] = 0x3F80;
  bf.data<uint16_t>()[1] = 0xFF80;
  h.data<uint16_t>()[0] = 0x7BFF;
  h.data<uint16_t>()[1] = 0x7E00;
  EXPECT_EQ(lit(bf), "dense<[1.00000000e+00, 0xFF80]>");
  EXPECT_EQ(lit(h), "dense<[6.55040000e+04, 0x7E00]>");
  EXPECT_EQ(lit(Array::from<int32_t>({3}, {-1, 0, 2147483647})), "dense<[-1, 0, 2147483647]>");
  EXPECT_EQ(lit(Array::from<uint32_t>({2}, {4294967295u, 7})), "dense<[4294967295, 7]>");
  EXPECT_EQ(lit(Array::from<bool>({2}, {true, false})), "dense<[true, false]>");
  EXPECT_EQ(lit(Array::filled(DType::f32, {2, 3}, 0.5)), "dense<5.00000000e-01>");
  EXPECT_EQ(lit(Array(DType::f32, {0})), "dense<>");
  // Above the threshold: little-endian bytes; 1.0f = 0x3F800000 -> 0000803F.
  std::vector<float> big(size_t(shlo::kHexThreshold) + 1, 0.0f);
  big[0] = 1.0f;
  std::string s = lit(Array::from<float>({int64_t(big.size())}, big));
  EXPECT_EQ(s.substr(0, 24), "dense<\"0x0000803F0000000");
  EXPECT_EQ(s.size(), 9 + 8 * big.size() + 2);
}

TEST(StablehloEmit, ReduceInitsAndPrecision) {
  Builder b;
  auto x = b.parameter({DType::u32, {4}});
  auto y = b.parameter({DType::s32, {4}});
  auto a = b.parameter(f32({2, 2}));
  Function f =
      b.build({b.reduce(x, ReduceKind::min, {0}), b.reduce(y, ReduceKind::max, {0}),
               b.reduce(a, ReduceKind::sum, {0, 1}), b.dot_general(a, a, {{}, {}, {1}, {0}})});
  shlo::EmitOptions o;
  o.precision = shlo::Precision::HIGHEST;
  std::string t = shlo::emit(f, o);
  EXPECT_NE(t.find("value = dense<4294967295> : tensor<ui32>"), std::string::npos) << t;
  EXPECT_NE(t.find("value = dense<-2147483648> : tensor<i32>"), std::string::npos) << t;
  EXPECT_NE(t.find("value = dense<0.00000000e+00> : tensor<f32>"), std::string::npos) << t;
  EXPECT_NE(t.find("dimensions = array<i64: 0, 1>"), std::string::npos) << t;
  EXPECT_NE(t.find("#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions "
                   "= [0]>, precision_config = [#stablehlo<precision HIGHEST>, "
                   "#stablehlo<precision HIGHEST>]"),
            std::string::npos)
      << t;
}

TEST(StablehloEmit, PrecisionNamesParse) {
  EXPECT_EQ(shlo::parse_precision("default"), shlo::Precision::DEFAULT);
  EXPECT_EQ(shlo::parse_precision("high"), shlo::Precision::HIGH);
  EXPECT_EQ(shlo::parse_precision("highest"), shlo::Precision::HIGHEST);
  for (const char* bad : {"HIGHEST", "tf32", "", "fastest"}) {
    try {
      shlo::parse_precision(bad, "--matmul-precision");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("--matmul-precision '{}': use default, high or highest", bad));
    }
  }
}

TEST(StablehloEmit, DeterministicAndVerifies) {
  for (auto& [op, gold] : goldens()) EXPECT_EQ(shlo::emit(gold.build()), shlo::emit(gold.build()));
  Function bad;
  bad.results = {3};
  EXPECT_THROW(shlo::emit(bad), Error);
}
