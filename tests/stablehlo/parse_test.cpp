// StableHLO reader: hand-written module texts, emit -> parse structure, and errors with
// line / column.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tlaloc/ir/builder.h"
#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/stablehlo/parse.h"

using namespace tlaloc;
using namespace tlaloc::ir;
namespace shlo = tlaloc::stablehlo;

namespace {

std::string error_of(std::string_view text) {
  try {
    shlo::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

const char* kHandWritten = R"(// a comment
module @step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%w: tensor<2x3xf32> {tf.aliasing_output = 1 : i32, tlaloc.name = "0.weight"},
                         %x: tensor<3xf32>) -> (tensor<2xf32> {tlaloc.name = "y"}, tensor<2x3xf32>) {
    %zero = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %p = "stablehlo.dot_general"(%w, %x) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
    %s = "stablehlo.reduce"(%w, %zero) <{dimensions = array<i64: 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = "stablehlo.add"(%b, %a) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%c) : (tensor<f32>) -> ()
    }) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %y = "stablehlo.add"(%p, %s) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%y, %w) : (tensor<2xf32>, tensor<2x3xf32>) -> ()
  }
}
)";

}  // namespace

TEST(StablehloParse, HandWrittenModule) {
  Function f = shlo::parse(kHandWritten);
  EXPECT_EQ(f.name, "step");
  ASSERT_EQ(f.num_inputs(), 2);
  EXPECT_EQ(f.input_type(0), (TensorType{DType::f32, {2, 3}}));
  EXPECT_EQ(f.input_names, (std::vector<std::string>{"0.weight", ""}));
  EXPECT_EQ(f.output_names, (std::vector<std::string>{"y", ""}));
  EXPECT_EQ(f.aliases, (std::vector<Alias>{{1, 0}}));
  ASSERT_EQ(f.num_outputs(), 2);
  EXPECT_EQ(f.output_type(0), (TensorType{DType::f32, {2}}));
  // The reduce's init constant folds into the reduce: dot_general, reduce, add.
  EXPECT_EQ(f.num_ops(), 3);
  const Node& red = f.nodes[size_t(f.nodes[size_t(f.results[0])].operands[1])];
  EXPECT_EQ(red.op, Op::reduce);
  EXPECT_EQ(red.attrs.reduce_kind, ReduceKind::sum);
  EXPECT_EQ(red.attrs.dimensions, (std::vector<int64_t>{1}));
  const Node& dot = f.nodes[size_t(f.nodes[size_t(f.results[0])].operands[0])];
  EXPECT_EQ(dot.attrs.lhs_contracting_dimensions, (std::vector<int64_t>{1}));
  EXPECT_TRUE(dot.attrs.lhs_batching_dimensions.empty());
}

TEST(StablehloParse, EmitParseEmitIsAFixedPoint) {
  Builder b("mixed");
  auto x = b.parameter({DType::f32, {4, 3}}, "x");
  auto idx = b.parameter({DType::s32, {2}});
  auto c = b.constant(Array::from<float>({3}, {0.25f, -1e-30f, 3e38f}));
  auto g = b.gather(x, idx);
  auto s = b.scatter(x, idx, g);
  auto m = b.reduce(s, ReduceKind::min, {0});
  auto lt = b.compare(m, c, Comparison::LE);
  auto sel = b.select(lt, m, c);
  auto i = b.iota({DType::u32, {3}}, 0);
  auto h = b.convert(sel, DType::f16);
  auto bf = b.constant(Array::filled(DType::bf16, {3}, -std::numeric_limits<double>::infinity()));
  Function f =
      b.build({sel, i, h, bf, b.reduce(x, ReduceKind::max, {0, 1})}, {"a", "b", "", "", ""});
  std::string t1 = shlo::emit(f);
  Function g2 = shlo::parse(t1);
  EXPECT_EQ(shlo::emit(g2), t1);
  EXPECT_EQ(g2.num_ops(), f.num_ops());
  EXPECT_EQ(g2.input_names, f.input_names);
  EXPECT_EQ(g2.output_names, f.output_names);
  // Constants come back bit for bit (incl. -1e-30f, 3e38f and bf16 -inf).
  for (size_t k = 0; k < f.nodes.size(); ++k)
    if (f.nodes[k].op == Op::constant) {
      bool found = false;
      for (const Node& n : g2.nodes)
        found = found ||
                (n.op == Op::constant && n.attrs.value->bitwise_equal(*f.nodes[k].attrs.value));
      EXPECT_TRUE(found) << k;
    }
}

TEST(StablehloParse, ConstantLiterals) {
  auto one = [](const std::string& lit, const std::string& type) {
    std::string t = "module {\n func.func @main() -> (" + type +
                    ") {\n  %0 = \"stablehlo.constant\"() <{value = " + lit + " : " + type +
                    "}> : () -> " + type + "\n  \"func.return\"(%0) : (" + type +
                    ") -> ()\n }\n}\n";
    Function f = shlo::parse(t);
    return *f.nodes[size_t(f.results[0])].attrs.value;
  };
  EXPECT_EQ(one("dense<[[1, -2], [3, 4]]>", "tensor<2x2xi32>").to_vector<int32_t>(),
            (std::vector<int32_t>{1, -2, 3, 4}));
  EXPECT_EQ(one("dense<4294967295>", "tensor<2xui32>").to_vector<uint32_t>(),
            (std::vector<uint32_t>{4294967295u, 4294967295u}));
  EXPECT_EQ(one("dense<[true, false]>", "tensor<2xi1>").to_vector<uint8_t>(),
            (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(one("dense<[0x7FC00000, 2.5]>", "tensor<2xf32>").at(1), 2.5);
  EXPECT_TRUE(std::isnan(one("dense<[0x7FC00000, 2.5]>", "tensor<2xf32>").at(0)));
  EXPECT_EQ(one("dense<\"0x0000803F00000040\">", "tensor<2xf32>").to_vector<float>(),
            (std::vector<float>{1.0f, 2.0f}));
  // bf16 0x3FC0 = 1.5; f16 0x3C00 = 1.0.
  EXPECT_EQ(one("dense<1.5>", "tensor<bf16>").to_vector<uint16_t>()[0], 0x3FC0);
  EXPECT_EQ(one("dense<0x3C00>", "tensor<f16>").to_vector<uint16_t>()[0], 0x3C00);
  EXPECT_EQ(one("dense<-1.0e-1>", "tensor<f64>").at(0), -0.1);
  EXPECT_EQ(one("dense<[[1, 2, 3], [4, 5, 6]]>", "tensor<2x3xi32>").to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(one("dense<[[1, 2, 3], [4, 5]]>", "tensor<2x3xi32>"), Error);
  EXPECT_THROW(one("dense<[1, 2, 3]>", "tensor<2x3xi32>"), Error);
  EXPECT_THROW(one("dense<[1.5, 2]>", "tensor<2xi32>"), Error);
  EXPECT_THROW(one("dense<[4294967296, 2]>", "tensor<2xui32>"), Error);
}

TEST(StablehloParse, ErrorsNameLineAndColumn) {
  std::string t = kHandWritten;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = t;
    s.replace(s.find(from), from.size(), to);
    return error_of(s);
  };
  std::string e = with("\"stablehlo.add\"(%p", "\"stablehlo.fft\"(%p");
  EXPECT_NE(e.find("line 12 column 5"), std::string::npos) << e;
  EXPECT_NE(e.find("unsupported op 'stablehlo.fft'"), std::string::npos) << e;
  e = with("(%p, %s) : (tensor<2xf32>", "(%p, %q) : (tensor<2xf32>");
  EXPECT_NE(e.find("undefined value %q"), std::string::npos) << e;
  e = with("-> tensor<2xf32>\n    \"func", "-> tensor<3xf32>\n    \"func");
  EXPECT_NE(e.find("declared result tensor<3xf32> but it infers tensor<2xf32>"), std::string::npos)
      << e;
  e = with("dense<0.0>", "dense<1.0>");
  EXPECT_NE(e.find("init %zero must be a constant dense<0.00000000e+00>"), std::string::npos) << e;
  e = with("tensor<3xf32>)", "tensor<3xf8>)");
  EXPECT_NE(e.find("line 4"), std::string::npos) << e;
  EXPECT_NE(e.find("unsupported element type 'f8'"), std::string::npos) << e;
  e = with("tf.aliasing_output", "jax.buffer_donor");
  EXPECT_NE(e.find("unsupported attribute 'jax.buffer_donor'"), std::string::npos) << e;
  e = with("\"stablehlo.add\"(%b, %a)", "\"stablehlo.multiply\"(%b, %a)");
  EXPECT_NE(e.find("unsupported region op 'multiply'"), std::string::npos) << e;
  EXPECT_NE(error_of("module {").find("line 1 column 9: expected 'func.func'"), std::string::npos)
      << error_of("module {");
  EXPECT_NE(error_of("").find("line 1 column 1"), std::string::npos);
  e = with("mhlo.num_partitions = 1", "mhlo.num_partitions = 2");
  EXPECT_NE(e.find("mhlo.num_partitions"), std::string::npos) << e;
}

TEST(StablehloParse, RejectsGatherThatIsNotARowGather) {
  std::string t = R"(module {
  func.func public @main(%x: tensor<5x3xf32>, %i: tensor<2xi32>) -> (tensor<2x3xf32>) {
    %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>}> : (tensor<5x3xf32>, tensor<2xi32>) -> tensor<2x3xf32>
    "func.return"(%0) : (tensor<2x3xf32>) -> ()
  }
})";
  std::string e = error_of(t);
  EXPECT_NE(e.find("line 3 column"), std::string::npos) << e;
  EXPECT_NE(e.find("row form along axis 0"), std::string::npos) << e;
}

// Damaged text never crashes the reader and never escapes as anything but tlaloc::Error.
TEST(StablehloParse, MutatedTextOnlyThrowsTlalocError) {
  std::vector<std::string> texts = {kHandWritten};
  {
    Builder b("m");
    auto x = b.parameter({DType::f32, {4, 3}}, "x");
    auto i = b.parameter({DType::s32, {2}});
    auto c = b.constant(Array::from<float>({3}, {0.25f, -1.5f, 3.0f}));
    auto g = b.gather(x, i);
    auto s = b.scatter(x, i, g);
    auto m = b.reduce(s, ReduceKind::min, {0});
    Function f = b.build({b.select(b.compare(m, c, Comparison::LE), m, c),
                          b.dot_general(x, x, {{}, {}, {0}, {0}}), b.iota({DType::u32, {3}}, 0)});
    texts.push_back(shlo::emit(f));
  }
  const std::string alphabet = "0123456789x<>[](){}%:,=\"-.e#@^ abfiu";
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int errors = 0, parsed = 0;
  for (int k = 0; k < 4000; ++k) {
    std::string t = texts[size_t(k) % texts.size()];
    for (int edits = 1 + int(next() % 3); edits > 0; --edits) {
      size_t p = next() % t.size();
      switch (next() % 4) {
        case 0:
          t[p] = alphabet[next() % alphabet.size()];
          break;
        case 1:
          t.erase(p, 1 + next() % 8);
          break;
        case 2:
          t.insert(p, 1, alphabet[next() % alphabet.size()]);
          break;
        default:
          t.insert(p, "99999999999999999999");
      }
    }
    try {
      shlo::parse(t);
      ++parsed;
    } catch (const Error&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-tlaloc exception " << e.what() << " for:\n" << t;
      break;
    }
  }
  EXPECT_THROW(
      shlo::parse("module { func.func @main() -> () { %0 = \"stablehlo.constant\"() <{value "
                  "= dense<" +
                  std::string(100000, '[') + ">}> }}"),
      Error);
  EXPECT_THROW(shlo::parse("module attributes {a = " + std::string(100000, '[') + "} {}"), Error);
  EXPECT_GT(errors, 3000);
  EXPECT_EQ(parsed + errors, 4000);
}

// Max pooling and its gradient as JAX lowers them (splat padding, dilations omitted), and
// errors in their regions and attributes.
TEST(StablehloParse, ReduceWindowAndSelectAndScatter) {
  const std::string head =
      "module @m {\n  func.func public @main(%x: tensor<1x4x4xf32>, %g: tensor<1x2x2xf32>) -> "
      "(tensor<1x2x2xf32>, tensor<1x4x4xf32>) {\n"
      "    %ninf = \"stablehlo.constant\"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> "
      "tensor<f32>\n"
      "    %zero = \"stablehlo.constant\"() <{value = dense<0.0> : tensor<f32>}> : () -> "
      "tensor<f32>\n";
  const std::string rw =
      "    %y = \"stablehlo.reduce_window\"(%x, %ninf) <{padding = dense<0> : tensor<3x2xi64>, "
      "window_dimensions = array<i64: 1, 2, 2>, window_strides = array<i64: 1, 2, 2>}> ({\n"
      "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
      "      %m = \"stablehlo.maximum\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "      \"stablehlo.return\"(%m) : (tensor<f32>) -> ()\n"
      "    }) : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x2x2xf32>\n";
  auto sas = [](const char* dir, const char* scatter_op) {
    return fmt::format(
        "    %d = \"stablehlo.select_and_scatter\"(%x, %g, %zero) <{{padding = dense<[[0, 0], "
        "[0, 0], [0, 0]]> : tensor<3x2xi64>, window_dimensions = array<i64: 1, 2, 2>, "
        "window_strides = array<i64: 1, 2, 2>}}> ({{\n"
        "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "      %c = \"stablehlo.compare\"(%a, %b) <{{comparison_direction = "
        "#stablehlo<comparison_direction {}>}}> : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
        "      \"stablehlo.return\"(%c) : (tensor<i1>) -> ()\n"
        "    }}, {{\n"
        "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "      %s = \"stablehlo.{}\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
        "      \"stablehlo.return\"(%s) : (tensor<f32>) -> ()\n"
        "    }}) : (tensor<1x4x4xf32>, tensor<1x2x2xf32>, tensor<f32>) -> tensor<1x4x4xf32>\n",
        dir, scatter_op);
  };
  const std::string tail =
      "    \"func.return\"(%y, %d) : (tensor<1x2x2xf32>, tensor<1x4x4xf32>) -> ()\n  }\n}\n";
  Function f = shlo::parse(head + rw + sas("GE", "add") + tail);
  EXPECT_EQ(f.num_ops(), 2);  // the init constants fold into their ops
  const Node& y = f.nodes[size_t(f.results[0])];
  EXPECT_EQ(y.op, Op::reduce_window);
  EXPECT_EQ(y.attrs.reduce_kind, ReduceKind::max);
  EXPECT_EQ(y.attrs.window_strides, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(y.attrs.padding_high, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(y.attrs.base_dilations, (std::vector<int64_t>{1, 1, 1}));
  const Node& d = f.nodes[size_t(f.results[1])];
  EXPECT_EQ(d.op, Op::select_and_scatter);
  EXPECT_EQ(d.attrs.comparison_direction, Comparison::GE);
  EXPECT_NE(error_of(head + rw + sas("EQ", "add") + tail).find("select 'EQ'"), std::string::npos);
  EXPECT_NE(error_of(head + rw + sas("GE", "maximum") + tail).find("must be an add"),
            std::string::npos);
  std::string bad_pad = head + rw + sas("GE", "add") + tail;
  bad_pad.replace(bad_pad.find("tensor<3x2xi64>"), 15, "tensor<2x3xi64>");
  EXPECT_NE(error_of(bad_pad).find("padding must be a tensor<3x2xi64>"), std::string::npos);
  std::string bad_init = head + rw + sas("GE", "add") + tail;
  bad_init.replace(bad_init.find("(%x, %ninf)"), 11, "(%x, %zero)");
  EXPECT_NE(error_of(bad_init).find("init %zero must be a constant"), std::string::npos);
}
