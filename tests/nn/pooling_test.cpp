// trace::max_pool2d / avg_pool2d against PyTorch (tests/nn/fixtures/torch_pool.json, written by
// tests/nn/make_pool_fixtures.py with torch 1.13): outputs and input gradients in f64, ties in
// windows included (the first maximum takes the gradient); the layers' reprs, output shapes and
// argument errors; Flatten.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/nn/pooling.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

std::vector<Array> run(const ir::Function& f, std::vector<Array> in) {
  return runtime::host::compile(f)->run(in);
}

Shape shape_of(const nlohmann::json& j) { return Shape(j.get<std::vector<int64_t>>()); }

trace::Size2 size2(const nlohmann::json& args, const char* k, trace::Size2 dflt) {
  if (!args.contains(k)) return dflt;
  const auto& v = args[k];
  if (v.is_array()) return {v[0].get<int64_t>(), v[1].get<int64_t>()};
  return {v.get<int64_t>(), v.get<int64_t>()};
}

Tensor pool(const nlohmann::json& c, const Tensor& x) {
  const auto& a = c["args"];
  const trace::Size2 k = size2(a, "kernel_size", {0, 0});
  std::optional<trace::Size2> s;
  if (a.contains("stride")) s = size2(a, "stride", k);
  const trace::Size2 p = size2(a, "padding", {0, 0});
  const bool ceil = a.value("ceil_mode", false);
  if (c["op"] == "max") return trace::max_pool2d(x, k, s, p, size2(a, "dilation", {1, 1}), ceil);
  std::optional<int64_t> div;
  if (a.contains("divisor_override")) div = a["divisor_override"].get<int64_t>();
  return trace::avg_pool2d(x, k, s, p, ceil, a.value("count_include_pad", true), div);
}

void expect_close(const Array& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(size_t(got.numel()), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst =
        std::max(worst, std::abs(got.at(int64_t(i)) - want[i]) / std::max(1.0, std::abs(want[i])));
  EXPECT_LE(worst, 1e-6) << what;
}

}  // namespace

TEST(PoolingTorch, OutputsAndGradientsMatchPyTorch) {
  std::ifstream in(std::string(TLALOC_SOURCE_DIR) + "/tests/nn/fixtures/torch_pool.json");
  ASSERT_TRUE(in) << "missing fixture";
  const nlohmann::json fx = nlohmann::json::parse(in);
  ASSERT_GE(fx["cases"].size(), 18u);
  for (const auto& c : fx["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const Shape xs = shape_of(c["shape"]);
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> a) { return std::vector<Tensor>{pool(c, a[0])}; },
        {{DType::f64, xs}});
    ASSERT_EQ(f.output_type(0).shape, shape_of(c["out_shape"]));
    const Array x = Array::from_doubles(DType::f64, xs, c["x"].get<std::vector<double>>());
    expect_close(run(f, {x})[0], c["out"].get<std::vector<double>>(), "output");
    ir::Function g = autodiff::vjp(f, {0});
    const Array ct = Array::from_doubles(DType::f64, shape_of(c["out_shape"]),
                                         c["ct"].get<std::vector<double>>());
    expect_close(run(g, {x, ct})[0], c["grad"].get<std::vector<double>>(), "gradient");
  }
}

TEST(Pooling, LayerReprsAndShapes) {
  nn::MaxPool2d mp(2);
  EXPECT_EQ(mp.repr(),
            "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  nn::MaxPool2d mp3(3, 2, 1);
  EXPECT_EQ(mp3.repr(),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)");
  nn::MaxPool2d mpt({2, 3}, nn::Pool2dArg{1, 2}, 0, 1, true);
  EXPECT_EQ(mpt.repr(),
            "MaxPool2d(kernel_size=(2, 3), stride=(1, 2), padding=0, dilation=1, ceil_mode=True)");
  nn::AvgPool2d ap(2);
  EXPECT_EQ(ap.repr(), "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  nn::AvgPool2d ap3(3, 2, 1, false, false);
  EXPECT_EQ(ap3.repr(), "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  nn::Flatten fl;
  EXPECT_EQ(fl.repr(), "Flatten(start_dim=1, end_dim=-1)");
  EXPECT_EQ(nn::Flatten(0, 2).repr(), "Flatten(start_dim=0, end_dim=2)");
  // The Fashion-MNIST CNN's shapes: [128, 32, 28, 28] -> [128, 32, 14, 14] -> [128, 64, 7, 7]
  // (3x3 stride 2 pad 1) -> [128, 3136].
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> a) {
        return std::vector<Tensor>{mp(a[0]),
                                   ap(a[0]),
                                   mp3(a[1]),
                                   fl(mp3(a[1])),
                                   nn::Flatten(0, 1)(a[1]),
                                   nn::Flatten(-2)(a[1])};
      },
      {{DType::f32, {128, 32, 28, 28}}, {DType::f32, {128, 64, 14, 14}}});
  EXPECT_EQ(f.output_type(0).shape, (Shape{128, 32, 14, 14}));
  EXPECT_EQ(f.output_type(1).shape, (Shape{128, 32, 14, 14}));
  EXPECT_EQ(f.output_type(2).shape, (Shape{128, 64, 7, 7}));
  EXPECT_EQ(f.output_type(3).shape, (Shape{128, 3136}));
  EXPECT_EQ(f.output_type(4).shape, (Shape{8192, 14, 14}));
  EXPECT_EQ(f.output_type(5).shape, (Shape{128, 64, 196}));
}

TEST(Pooling, ArgumentErrors) {
  auto error_of = [](auto fn) -> std::string {
    try {
      trace::capture([&](std::span<const Tensor> a) { return std::vector<Tensor>{fn(a[0])}; },
                     {{DType::f32, {1, 2, 5, 5}}});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto has = [](const std::string& m, const char* s) { return m.find(s) != std::string::npos; };
  EXPECT_TRUE(has(error_of([](const Tensor& x) {
                    return trace::max_pool2d(x, {2, 2}, {}, {2, 0});
                  }),
                  "max_pool2d: padding 2 must be >= 0 and at most half the kernel size 2"));
  EXPECT_TRUE(has(error_of([](const Tensor& x) {
                    return trace::avg_pool2d(x, {0, 2});
                  }),
                  "avg_pool2d: kernel_size, stride and dilation must be >= 1"));
  EXPECT_TRUE(has(error_of([](const Tensor& x) {
                    return trace::max_pool2d(x, {6, 2});
                  }),
                  "output size 0 (too small)"));
  EXPECT_TRUE(has(error_of([](const Tensor& x) {
                    return trace::avg_pool2d(x, {2, 2}, {}, {}, false, true, 0);
                  }),
                  "divisor_override must be nonzero"));
  EXPECT_TRUE(has(error_of([](const Tensor& x) {
                    return trace::max_pool2d(trace::reshape(x, {50}), {2, 2});
                  }),
                  "expects x [N, C, H, W] or [C, H, W]"));
  EXPECT_TRUE(has(error_of([](const Tensor& x) { return nn::Flatten(3, 1)(x); }),
                  "Flatten: start_dim 3 comes after end_dim 1"));
  EXPECT_TRUE(has(error_of([](const Tensor& x) { return nn::Flatten(1, 4)(x); }), "out of range"));
}
