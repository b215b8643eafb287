// Bad input to the IR raises tlaloc::Error naming the op and the shapes / dtypes, never aborts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/support/composite_ops.h"
#include "tlaloc/ir/builder.h"

using namespace tlaloc;
using namespace tlaloc::ir;

namespace {

// Expects fn to throw tlaloc::Error whose message contains every needle.
template <typename F>
void expect_error(F fn, std::vector<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning " << needles[0];
  } catch (const Error& e) {
    std::string m = e.what();
    for (auto& n : needles)
      EXPECT_NE(m.find(n), std::string::npos) << "'" << n << "' not in: " << m;
  }
}

}  // namespace

TEST(VerifierErrors, ElementwiseDtypeAndShape) {
  Builder b;
  auto f = b.parameter({DType::f32, {2}});
  auto i = b.parameter({DType::s32, {2}});
  auto g = b.parameter({DType::f32, {3}});
  expect_error([&] { b.binary(Op::multiply, f, i); }, {"multiply", "f32[2]", "s32[2]"});
  expect_error([&] { b.binary(Op::subtract, f, g); }, {"subtract", "f32[2]", "f32[3]"});
  expect_error([&] { b.unary(Op::exponential, i); }, {"exponential", "floating", "s32"});
  expect_error([&] { b.binary(Op::shift_left, f, f); }, {"shift_left", "integer"});
  expect_error([&] { b.binary(Op::power, i, i); }, {"power", "floating"});
  expect_error([&] { b.select(f, f, f); }, {"select", "pred", "i1"});
}

TEST(VerifierErrors, StructuralOps) {
  Builder b;
  auto x = b.parameter({DType::f32, {2, 3}});
  auto y = b.parameter({DType::f32, {4, 5}});
  auto idx = b.parameter({DType::f32, {2}});
  expect_error(
      [&] {
        b.dot_general(x, y, {{}, {}, {1}, {0}});
      },
      {"dot_general", "contracting", "3", "4"});
  expect_error([&] { b.reshape(x, Shape{4, 2}); }, {"reshape", "[4,2]", "8", "6"});
  expect_error([&] { b.transpose(x, {0, 0}); }, {"transpose", "permutation"});
  expect_error(
      [&] {
        b.broadcast_in_dim(x, Shape{2, 4}, {0, 1});
      },
      {"broadcast_in_dim", "size 3", "size 4"});
  expect_error([&] { b.slice(x, {0, 0}, {3, 3}); }, {"slice", "dim 0", "size 2"});
  expect_error([&] { b.reduce(x, ReduceKind::sum, {2}); }, {"reduce", "out of range"});
  expect_error([&] { b.concatenate({x, y}, 0); }, {"concatenate", "f32[2,3]", "f32[4,5]"});
  expect_error([&] { b.gather(x, idx); }, {"gather", "indices", "s32"});
  expect_error([&] { b.pad(x, y, {0, 0}, {1, 1}); }, {"pad", "scalar"});
  expect_error([&] { b.dynamic_slice(x, {}, {1, 1}); }, {"dynamic_slice", "3 operands"});
}

TEST(VerifierErrors, BuildAndVerify) {
  Builder b;
  auto x = b.parameter({DType::f32, {2}});
  expect_error([&] { b.build({x + 5}); }, {"result", "%5"});
  Function f = b.build({x});
  f.nodes[0].type.shape = Shape{3};  // parameter disagrees with nothing, but alias does:
  f.aliases.push_back({0, 3});
  expect_error([&] { verify(f); }, {"alias", "out of range"});
  Function g = Builder().build({});
  Builder c;
  auto p = c.parameter({DType::f32, {2}});
  auto q = c.unary(Op::negate, p);
  Function h = c.build({q});
  h.nodes[size_t(q)].operands[0] = q;  // uses itself
  expect_error([&] { verify(h); }, {"negate", "before it is defined"});
  h = c.build({q});
  h.nodes[size_t(q)].type = {DType::f32, Shape{5}};
  expect_error([&] { verify(h); }, {"negate", "declared f32[5]", "infers f32[2]"});
}

TEST(VerifierErrors, LayerNormComposites) {
  Builder b;
  auto x = b.parameter({DType::f32, {4, 8}});
  auto w = b.parameter({DType::f32, {8}});
  auto w7 = b.parameter({DType::f32, {7}});
  auto wd = b.parameter({DType::f64, {8}});
  auto xi = b.parameter({DType::s32, {4, 8}});
  auto dy = b.parameter({DType::f32, {4, 7}});
  expect_error([&] { cop::layer_norm(b, x, w7, -1, 1e-5); },
               {"tlaloc.layer_norm", "weight", "f32[8]", "f32[7]"});
  expect_error([&] { cop::layer_norm(b, x, w, wd, 1e-5); },
               {"tlaloc.layer_norm", "bias", "f64[8]"});
  expect_error([&] { cop::layer_norm(b, xi, w, -1, 1e-5); },
               {"tlaloc.layer_norm", "f32 or f64", "s32"});
  expect_error([&] { cop::layer_norm(b, x, w, -1, -1); }, {"tlaloc.layer_norm", "epsilon", "-1"});
  expect_error([&] { cop::layer_norm_grad(b, x, w, dy, 1e-5); },
               {"tlaloc.layer_norm_grad", "d_y", "f32[4,8]", "f32[4,7]"});
}

TEST(VerifierErrors, CrossEntropyComposites) {
  Builder b;
  auto x = b.parameter({DType::f32, {4, 8}});
  auto x3 = b.parameter({DType::f32, {4, 8, 2}});
  auto l = b.parameter({DType::s32, {4}});
  auto l5 = b.parameter({DType::s32, {5}});
  auto lf = b.parameter({DType::f32, {4}});
  auto d = b.parameter({DType::f64, {4}});
  expect_error([&] { cop::cross_entropy(b, x3, l); },
               {"tlaloc.cross_entropy", "[N, C]", "f32[4,8,2]"});
  expect_error([&] { cop::cross_entropy(b, x, l5); },
               {"tlaloc.cross_entropy", "labels", "s32[4]", "s32[5]"});
  expect_error([&] { cop::cross_entropy(b, x, lf); }, {"tlaloc.cross_entropy", "labels", "f32[4]"});
  expect_error([&] { cop::cross_entropy_grad(b, x, l, d); },
               {"tlaloc.cross_entropy_grad", "d_loss", "f32[4]", "f64[4]"});
}

TEST(VerifierErrors, GeluComposites) {
  Builder b;
  auto x = b.parameter({DType::f32, {4, 8}});
  auto xi = b.parameter({DType::s32, {4, 8}});
  auto xh = b.parameter({DType::bf16, {4, 8}});
  auto x7 = b.parameter({DType::f32, {4, 7}});
  auto xd = b.parameter({DType::f64, {4, 8}});
  expect_error([&] { cop::gelu(b, xi); }, {"tlaloc.gelu", "f32 or f64", "s32"});
  expect_error([&] { cop::gelu(b, xh); }, {"tlaloc.gelu", "f32 or f64", "bf16"});
  expect_error([&] { cop::gelu_grad(b, x, x7, x); },
               {"tlaloc.gelu_grad", "y", "f32[4,8]", "f32[4,7]"});
  expect_error([&] { cop::gelu_grad(b, x, x, xd); },
               {"tlaloc.gelu_grad", "d_y", "f32[4,8]", "f64[4,8]"});
}

// More bad operands of the layer_norm / cross_entropy composites: each a tlaloc::Error naming
// the op and the disagreeing types or values.
TEST(VerifierErrors, NormLossCompositeEdges) {
  Builder b;
  auto x = b.parameter({DType::f32, {4, 8}});
  auto w = b.parameter({DType::f32, {8}});
  auto wd = b.parameter({DType::f64, {8}});
  auto xb = b.parameter({DType::bf16, {4, 8}});
  auto wb = b.parameter({DType::bf16, {8}});
  auto s = b.parameter({DType::f32, {}});
  auto dy = b.parameter({DType::f64, {4, 8}});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { cop::layer_norm(b, xb, wb, -1, 1e-5); },
               {"tlaloc.layer_norm", "f32 or f64", "bf16"});
  expect_error([&] { cop::layer_norm(b, x, wd, -1, 1e-5); },
               {"tlaloc.layer_norm", "weight", "f32[8]", "f64[8]"});
  expect_error([&] { cop::layer_norm(b, s, s, -1, 1e-5); }, {"tlaloc.layer_norm", "rank >= 1"});
  expect_error([&] { cop::layer_norm(b, x, w, -1, nan); }, {"tlaloc.layer_norm", "epsilon", "nan"});
  expect_error([&] { cop::layer_norm(b, x, w, -1, HUGE_VAL); },
               {"tlaloc.layer_norm", "epsilon", "inf"});
  expect_error([&] { cop::layer_norm_grad(b, x, w, dy, 1e-5); },
               {"tlaloc.layer_norm_grad", "d_y", "f32[4,8]", "f64[4,8]"});
  expect_error([&] { cop::layer_norm_grad(b, x, w, x, -0.5); },
               {"tlaloc.layer_norm_grad", "epsilon", "-0.5"});

  auto lu = b.parameter({DType::u32, {4}});
  auto l = b.parameter({DType::s32, {4}});
  auto l2 = b.parameter({DType::s32, {4, 1}});
  auto d3 = b.parameter({DType::f32, {3}});
  auto d41 = b.parameter({DType::f32, {4, 1}});
  auto xb2 = b.parameter({DType::bf16, {4, 8}});
  expect_error([&] { cop::cross_entropy(b, xb2, l); },
               {"tlaloc.cross_entropy", "f32 or f64", "bf16"});
  expect_error([&] { cop::cross_entropy(b, x, lu); }, {"tlaloc.cross_entropy", "labels", "u32[4]"});
  expect_error([&] { cop::cross_entropy(b, x, l2); },
               {"tlaloc.cross_entropy", "labels", "s32[4,1]"});
  expect_error([&] { cop::cross_entropy(b, w, l); }, {"tlaloc.cross_entropy", "[N, C]", "f32[8]"});
  expect_error([&] { cop::cross_entropy_grad(b, x, l, d3); },
               {"tlaloc.cross_entropy_grad", "d_loss", "f32[4]", "f32[3]"});
  expect_error([&] { cop::cross_entropy_grad(b, x, l, d41); },
               {"tlaloc.cross_entropy_grad", "d_loss", "f32[4,1]"});
}

// A value whose byte size overflows 64 bits is refused where it is made (Builder) and by verify
// (a function edited by hand), naming the op and the type.
TEST(VerifierErrors, ByteSizeOver64Bits) {
  constexpr int64_t k2to31 = int64_t(1) << 31;
  const std::string huge = "f32[2147483648,2147483648]";
  Builder b;
  expect_error([&] { b.parameter({DType::f32, {k2to31, k2to31}}); }, {"parameter", huge});
  expect_error([&] { b.iota({DType::f32, {k2to31, k2to31}}, 0); }, {"iota", huge});
  auto one = b.scalar(DType::f32, 1.0);
  expect_error([&] { b.broadcast_in_dim(one, {k2to31, k2to31}, {}); }, {"broadcast_in_dim", huge});
  expect_error(
      [&] {
        b.iota({DType::s32, {int64_t(1) << 40, int64_t(1) << 40}}, 0);
      },
      {"iota", "s32[1099511627776,1099511627776]"});

  Builder ok;
  auto i = ok.iota({DType::f32, {4, 4}}, 0);
  Function f = ok.build({i});
  f.nodes[size_t(i)].type.shape = Shape{k2to31, k2to31};
  expect_error([&] { verify(f); }, {"iota", huge});
}

// Multi-result nodes and composite attributes (ir.h, ir/composite.h): each misuse is an error
// naming it.
TEST(VerifierErrors, MultiResultNodesAndCompositeAttributes) {
  Builder b;
  auto q = b.parameter({DType::f32, {1, 2, 3, 4}});
  auto k = b.parameter({DType::f32, {1, 2, 5, 4}});
  auto x = b.parameter({DType::f32, {3, 4}});
  expect_error(
      [&] {
        b.composite(Op::attention, {q, k, k}, {0.5, 2});
      },
      {"tlaloc.attention", "causal 2"});
  // A result node of a value that is not a multi-result composite, or out of order.
  Node r{Op::result, {}, {x}, {}};
  expect_error([&] { b.add(r); }, {"result", "not a composite with several results"});
  auto outs = b.composite(Op::attention, {q, k, k}, {0.5, 0});
  Node again{Op::result, {}, {outs[0] - 1}, {}};
  expect_error([&] { b.add(again); }, {"result #0", "must follow it directly"});
  // Reading the composite itself instead of its results.
  expect_error([&] { b.unary(Op::negate, outs[0] - 1); }, {"negate", "several results"});
  // Optimizer updates: non-finite or non-flag attributes.
  auto p = b.parameter({DType::f32, {3}});
  auto step = b.parameter({DType::s32, {}}), lr = b.parameter({DType::f64, {}});
  auto skip = b.parameter({DType::i1, {}});
  expect_error(
      [&] {
        b.composite(Op::adam_update, {p, p, p, p, step, lr, lr, skip},
                    {0.9, 0.999, HUGE_VAL, 0, 1, 0, 0});
      },
      {"tlaloc.adam_update", "eps inf"});
  expect_error(
      [&] {
        b.composite(Op::adam_update, {p, p, p, p, step, lr, lr, skip},
                    {0.9, 0.999, 1e-8, 0, 0.5, 0, 0});
      },
      {"tlaloc.adam_update", "decoupled 0.5 must be 0 or 1"});
  expect_error(
      [&] {
        b.composite(Op::sgd_update, {p, p, step, lr, lr, skip}, {0, 0, 0, 1, 0});
      },
      {"tlaloc.sgd_update", "nesterov needs momentum > 0"});
  // An output aliased to two inputs.
  Builder c;
  auto a0 = c.parameter({DType::f32, {2}}), a1 = c.parameter({DType::f32, {2}});
  Function f = c.build({c.binary(Op::add, a0, a1)});
  f.aliases = {{0, 0}, {0, 1}};
  expect_error([&] { verify(f); }, {"output 0 is aliased to more than one input"});
}

TEST(VerifierErrors, Convolution) {
  Builder b;
  auto x = b.parameter({DType::f32, {2, 4, 6, 6}});
  auto w = b.parameter({DType::f32, {6, 2, 3, 3}});
  auto w3 = b.parameter({DType::f32, {6, 2, 3}});
  auto wd = b.parameter({DType::f64, {6, 4, 3, 3}});
  auto i = b.parameter({DType::s32, {2, 4, 6, 6}});
  auto conv = [&](ValueId l, ValueId r, auto edit) {
    ConvOptions o;
    o.feature_group_count = 2;
    edit(o);
    return b.convolution(l, r, o);
  };
  auto none = [](ConvOptions&) {};
  EXPECT_EQ(b.type(conv(x, w, none)).shape, (Shape{2, 6, 4, 4}));
  expect_error([&] { conv(x, w3, none); }, {"convolution", "rank 4", "rhs rank 3"});
  expect_error([&] { conv(x, wd, [](ConvOptions& o) { o.feature_group_count = 1; }); },
               {"convolution", "one floating dtype", "f32", "f64"});
  expect_error([&] { conv(i, i, none); }, {"convolution", "floating"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) { o.window_strides = {1}; }); },
               {"convolution", "window_strides", "2 spatial"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) {
                       o.window_strides = {1, 0};
                     }); },
               {"window_strides", "positive"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) {
                       o.lhs_dilation = {-1, 1};
                     }); },
               {"lhs_dilation", "positive"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) {
                       o.rhs_dilation = {1, 1, 1};
                     }); },
               {"rhs_dilation", "3 entries"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) {
                       o.padding = {{1, 1}};
                     }); },
               {"padding", "1 entries"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) {
                       o.padding = {{-4, -3}, {0, 0}};
                     }); },
               {"padding", "negative size"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) { o.feature_group_count = 3; }); },
               {"feature_group_count 3", "input feature size 4"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) { o.feature_group_count = 0; }); },
               {"feature_group_count 0", "positive"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) { o.feature_group_count = 1; }); },
               {"kernel input features 2", "input features 4"});
  expect_error([&] { conv(x, w, [](ConvOptions& o) { o.batch_group_count = 2; }); },
               {"at most one"});
  expect_error(
      [&] {
        conv(x, w, [](ConvOptions& o) {
          o.feature_group_count = 1;
          o.batch_group_count = 4;
        });
      },
      {"batch_group_count 4", "batch size 2"});
  expect_error(
      [&] {
        conv(x, w, [](ConvOptions& o) { o.dimension_numbers.input_spatial_dimensions = {2, 1}; });
      },
      {"input dimension numbers", "repeats axis 1"});
  expect_error(
      [&] {
        conv(x, w, [](ConvOptions& o) { o.dimension_numbers.kernel_spatial_dimensions = {2, 4}; });
      },
      {"kernel dimension numbers", "4 out of range"});
  expect_error(
      [&] { conv(x, w, [](ConvOptions& o) { o.dimension_numbers.output_feature_dimension = 0; }); },
      {"output dimension numbers", "repeats axis 0"});
  expect_error([&] { b.reverse(x, {1, 1}); }, {"reverse", "repeats axis 1"});
  expect_error([&] { b.reverse(x, {4}); }, {"reverse", "4 out of range"});
}

TEST(VerifierErrors, WindowOps) {
  Builder b;
  auto x = b.parameter({DType::f32, {2, 6}});
  auto i = b.parameter({DType::s32, {2, 6}});
  auto s = b.parameter({DType::f32, {1, 3}});
  auto d = b.parameter({DType::f64, {1, 3}});
  using K = ReduceKind;
  expect_error([&] { b.reduce_window(x, K::max, {2}); },
               {"reduce_window", "window_dimensions", "rank 2"});
  expect_error(
      [&] {
        b.reduce_window(x, K::max, {2, 0});
      },
      {"reduce_window", "window_dimensions 0 on dim 1", ">= 1"});
  expect_error(
      [&] {
        b.reduce_window(x, K::sum, {2, 2}, {1, 0});
      },
      {"reduce_window", "window_strides 0 on dim 1"});
  expect_error(
      [&] {
        b.reduce_window(x, K::sum, {2, 2}, {}, {0, -1});
      },
      {"reduce_window", "padding_low -1 on dim 1", ">= 0"});
  expect_error(
      [&] {
        b.reduce_window(x, K::sum, {2, 2}, {}, {}, {1});
      },
      {"reduce_window", "padding_high", "rank 2"});
  expect_error(
      [&] {
        b.reduce_window(x, K::sum, {2, 2}, {}, {}, {}, {1, 0});
      },
      {"reduce_window", "base_dilations 0 on dim 1"});
  expect_error(
      [&] {
        b.reduce_window(x, K::sum, {2, 2}, {}, {}, {}, {}, {0, 1});
      },
      {"reduce_window", "window_dilations 0 on dim 0"});
  expect_error([&] { b.reduce_window(i, K::sum, {1, 2}); }, {"reduce_window", "floating", "s32"});
  // A window longer than the padded input: no windows (StableHLO), not an error.
  EXPECT_EQ(b.type(b.reduce_window(x, K::sum, {3, 2})).shape, (Shape{0, 5}));
  EXPECT_EQ(b.type(b.reduce_window(x, K::sum, {2, 3}, {1, 2}, {0, 1}, {0, 1}, {}, {1, 2})).shape,
            (Shape{1, 2}));
  expect_error(
      [&] {
        b.select_and_scatter(x, s, Comparison::EQ, {2, 2}, {2, 2});
      },
      {"select_and_scatter", "select direction EQ"});
  expect_error(
      [&] {
        b.select_and_scatter(x, d, Comparison::GE, {2, 2}, {2, 2});
      },
      {"select_and_scatter", "source dtype"});
  expect_error(
      [&] {
        b.select_and_scatter(x, s, Comparison::GE, {2, 2}, {1, 1});
      },
      {"select_and_scatter", "source shape [1, 3]", "window count [1, 5]"});
  expect_error(
      [&] {
        b.select_and_scatter(x, s, Comparison::GE, {2, 2}, {2, 2}, {0, -1});
      },
      {"select_and_scatter", "padding_low -1"});
  expect_error([&] { b.select_and_scatter(x, s, Comparison::GE, {2}); },
               {"select_and_scatter", "window_dimensions", "rank 2"});
}

TEST(VerifierErrors, Collectives) {
  Builder b;
  auto x = b.parameter({DType::f32, {2, 3}});
  auto p = b.parameter({DType::i1, {4}});
  auto h = b.parameter({DType::bf16, {4}});
  EXPECT_EQ(b.type(b.all_reduce(x, ReduceKind::sum, all_replicas(4))),
            (TensorType{DType::f32, {2, 3}}));
  EXPECT_EQ(b.type(b.all_gather(x, 1, {{0, 1}, {2, 3}})), (TensorType{DType::f32, {2, 6}}));
  EXPECT_EQ(b.type(b.all_gather(p, 0, all_replicas(3))), (TensorType{DType::i1, {12}}));
  EXPECT_EQ(b.type(b.all_reduce(h, ReduceKind::max, {{0}})), (TensorType{DType::bf16, {4}}));
  EXPECT_EQ(b.type(b.all_reduce(p, ReduceKind::min, {{0}})), (TensorType{DType::i1, {4}}));
  expect_error([&] { b.all_reduce(x, ReduceKind::sum, {}); },
               {"all_reduce", "replica_groups", "empty"});
  expect_error(
      [&] {
        b.all_reduce(x, ReduceKind::sum, {{0, 1}, {2}});
      },
      {"all_reduce", "replica_groups [[0, 1], [2]]", "one size"});
  expect_error([&] { b.all_reduce(x, ReduceKind::sum, {{}}); },
               {"all_reduce", "replica_groups", "one size >= 1"});
  expect_error(
      [&] {
        b.all_gather(x, 0, {{0, 1}, {1, 2}});
      },
      {"all_gather", "replica_groups", "replica id 1 repeats"});
  expect_error(
      [&] {
        b.all_gather(x, 0, {{0, -1}});
      },
      {"all_gather", "replica_groups", "replica id -1 is negative"});
  expect_error([&] { b.all_gather(x, 2, {{0}}); },
               {"all_gather", "dimension (all_gather_dim) 2", "rank 2"});
  expect_error([&] { b.all_gather(x, -1, {{0}}); }, {"all_gather", "dimension", "-1"});
  expect_error([&] { b.all_reduce(p, ReduceKind::sum, {{0}}); },
               {"all_reduce", "no sum reduction of i1"});
  Node n{Op::all_reduce, {}, {x}, {}};
  n.attrs.replica_groups = {{0}};
  n.attrs.channel_id = -2;
  expect_error([&] { b.add(n); }, {"all_reduce", "channel_id -2"});
}
