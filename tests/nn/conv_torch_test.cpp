// Convolution against PyTorch (tests/nn/fixtures/torch_conv.json, written by
// tests/nn/make_conv_fixtures.py with Debian's torch 1.13, in float64): conv1d / conv2d / conv3d
// forward values and the VJP's input and kernel gradients (strides, padding, dilation, groups
// incl. depthwise, rectangular kernels, batch > 1), on the host lane in f64 and f32; and the
// Conv2d layer's parameters, repr (PyTorch's) and init bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/nn/conv.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;
using nlohmann::json;
using trace::Tensor;

namespace {

const json& fixtures() {
  static const json j = [] {
    std::string path = std::string(TLALOC_SOURCE_DIR) + "/tests/nn/fixtures/torch_conv.json";
    std::ifstream f(path);
    if (!f) throw Error("cannot open " + path);
    return json::parse(f);
  }();
  return j;
}

// v[i] = sin(a i + b) * scale, as the fixture script fills its inputs.
Array filled(DType t, const Shape& s, double a, double b, double scale) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b) * scale;
  return Array::from_doubles(t, s, v);
}

// Largest |got - want| / max(1, |want|).
double worst(const Array& got, const std::vector<double>& want) {
  std::vector<double> g = got.to_doubles();
  EXPECT_EQ(g.size(), want.size());
  double w = 0;
  for (size_t i = 0; i < g.size() && i < want.size(); ++i)
    w = std::max(w, std::abs(g[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  return w;
}

Tensor conv_of(const json& c, const Tensor& x, const Tensor& w) {
  const std::vector<int64_t> st = c.at("stride"), pad = c.at("padding"), dil = c.at("dilation");
  const int64_t groups = c.at("groups");
  if (st.size() == 2)  // PyTorch's conv2d entry point
    return trace::conv2d(x, w, {st[0], st[1]}, {pad[0], pad[1]}, {dil[0], dil[1]}, groups);
  ir::ConvOptions o;
  o.window_strides = st;
  for (int64_t p : pad) o.padding.push_back({p, p});
  o.rhs_dilation = dil;
  o.feature_group_count = groups;
  return trace::convolution(x, w, o);
}

}  // namespace

TEST(ConvTorch, ForwardAndGradientsEqualPyTorch) {
  for (DType t : {DType::f64, DType::f32}) {
    const double tol = t == DType::f64 ? 1e-12 : 1e-5;
    for (const json& c : fixtures().at("cases")) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " " + std::string(name(t)));
      const Shape xs(c.at("x").get<std::vector<int64_t>>());
      const Shape ws(c.at("w").get<std::vector<int64_t>>());
      const Shape ys(c.at("y_shape").get<std::vector<int64_t>>());
      ir::Function f = trace::capture(
          [&](std::span<const Tensor> in) { return std::vector<Tensor>{conv_of(c, in[0], in[1])}; },
          {{t, xs}, {t, ws}});
      ASSERT_EQ(f.output_type(0).shape, ys);
      ir::Function g = autodiff::vjp(f, {0, 1});
      if (t == DType::f32 && xs.rank() == 4) {  // 2-D f32: the gradients are the composites
        int composites = 0;
        for (const ir::Node& n : g.nodes)
          composites += n.op == ir::Op::conv_input_grad || n.op == ir::Op::conv_kernel_grad;
        EXPECT_EQ(composites, 2);
      }
      const Array x = filled(t, xs, 0.7, 1.0, 1.0), w = filled(t, ws, 1.3, 2.0, 0.5);
      std::vector<double> ctv(size_t(ys.numel()));
      for (size_t i = 0; i < ctv.size(); ++i) ctv[i] = std::cos(0.3 * double(i));
      const Array ct = Array::from_doubles(t, ys, ctv);
      for (int threads : {1, 2}) {
        runtime::host::Options o;
        o.num_threads = threads;
        auto y = runtime::host::compile(f, o)->run(std::vector<Array>{x, w});
        EXPECT_LE(worst(y[0], c.at("y")), tol) << threads << " threads";
        auto gr = runtime::host::compile(g, o)->run(std::vector<Array>{x, w, ct});
        EXPECT_LE(worst(gr[0], c.at("grad_x")), tol) << threads << " threads";
        EXPECT_LE(worst(gr[1], c.at("grad_w")), tol) << threads << " threads";
      }
    }
  }
}

TEST(Conv2dLayer, ParametersReprAndInit) {
  nn::Conv2d a(1, 32, 5, 1, 2);
  EXPECT_EQ(a.repr(), "Conv2d(1, 32, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))");
  a.init(random::key(3));
  auto named = a.named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].name, "weight");
  EXPECT_EQ(named[0].param->value.shape(), (Shape{32, 1, 5, 5}));
  EXPECT_EQ(named[1].name, "bias");
  EXPECT_EQ(named[1].param->value.shape(), (Shape{32}));
  // kaiming_uniform(a = √5): U(-1/√fan_in, 1/√fan_in), fan_in = 1 · 5 · 5; the bias the same.
  for (const auto& p : named) {
    double lo = 1, hi = -1;
    for (double v : p.param->value.to_doubles()) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    EXPECT_GE(lo, -0.2);
    EXPECT_LE(hi, 0.2);
    EXPECT_LT(lo, p.name == "weight" ? -0.18 : -0.1) << p.name;  // spread over the range
    EXPECT_GT(hi, p.name == "weight" ? 0.18 : 0.1) << p.name;
  }
  nn::Conv2d b(4, 8, {3, 2}, 2, 0, 1, 2, false);
  EXPECT_EQ(b.repr(), "Conv2d(4, 8, kernel_size=(3, 2), stride=(2, 2), groups=2, bias=False)");
  ASSERT_EQ(b.named_parameters().size(), 1u);
  EXPECT_EQ(b.named_parameters()[0].param->value.shape(), (Shape{8, 2, 3, 2}));
  b.init(random::key(4));
  const double bound = 1 / std::sqrt(2.0 * 3 * 2);
  for (double v : b.named_parameters()[0].param->value.to_doubles()) EXPECT_LE(std::abs(v), bound);
  nn::Conv2d c(3, 6, 3, 1, trace::Padding::same, {2, 1});
  EXPECT_EQ(c.repr(),
            "Conv2d(3, 6, kernel_size=(3, 3), stride=(1, 1), padding=same, "
            "dilation=(2, 1))");
  EXPECT_THROW(nn::Conv2d(3, 6, 3, 2, trace::Padding::same), Error);
  EXPECT_THROW(nn::Conv2d(3, 6, 3, 1, 0, 1, 2), Error);  // 3 channels in 2 groups
}

TEST(Conv2dLayer, ForwardAddsTheBiasPerChannel) {
  nn::Conv2d m(2, 3, 3, 1, trace::Padding::same, 1, 1, true, DType::f64);
  m.init(random::key(5));
  auto named = m.named_parameters();
  ir::Function f = trace::capture(
      [&](std::span<const Tensor> in) {
        m.bind(in.subspan(1));
        return std::vector<Tensor>{m(in[0]), trace::conv2d(in[0], in[1], 1, 1)};
      },
      {{DType::f64, {2, 2, 5, 4}}, {DType::f64, {3, 2, 3, 3}}, {DType::f64, {3}}});
  const Array x = filled(DType::f64, {2, 2, 5, 4}, 0.4, 0.1, 1.0);
  auto out = runtime::host::compile(f)->run(
      std::vector<Array>{x, named[0].param->value, named[1].param->value});
  ASSERT_EQ(out[0].shape(), (Shape{2, 3, 5, 4}));
  const std::vector<double> y = out[0].to_doubles(), z = out[1].to_doubles(),
                            b = named[1].param->value.to_doubles();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_DOUBLE_EQ(y[i], z[i] + b[(i / 20) % 3]) << i;
}
