// trace helpers against hand / NumPy-definition values, run on the host lane.
#include <gtest/gtest.h>

#include <cmath>

#include "tlaloc/composites/composites.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

std::vector<double> run1(const trace::TraceFn& fn, std::vector<Array> in) {
  std::vector<ir::TensorType> types;
  for (auto& a : in) types.push_back({a.dtype(), a.shape()});
  auto exe = runtime::host::compile(trace::capture(fn, types));
  return exe->run(in)[0].to_doubles();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

}  // namespace

TEST(Trace, NumpyBroadcasting) {
  // [2,1] + [3] -> [2,3]
  auto v = run1([](std::span<const Tensor> in) { return std::vector<Tensor>{in[0] + in[1]}; },
                {Array::from<float>({2, 1}, {10, 20}), Array::from<float>({3}, {1, 2, 3})});
  expect_near(v, {11, 12, 13, 21, 22, 23}, 0);
  EXPECT_THROW(
      trace::capture([](std::span<const Tensor> in) { return std::vector<Tensor>{in[0] * in[1]}; },
                     {{DType::f32, {2, 3}}, {DType::f32, {2}}}),
      Error);
}

TEST(Trace, MatmulBatchedAndVector) {
  // [2,2,3] @ [3,1] -> [2,2,1]
  auto v = run1(
      [](std::span<const Tensor> in) { return std::vector<Tensor>{trace::matmul(in[0], in[1])}; },
      {Array::from<float>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}),
       Array::from<float>({3, 1}, {1, 0, -1})});
  expect_near(v, {-2, -2, -2, -2}, 0);
  // [3] @ [2,3,2] -> [2,2] (vector promoted, batch broadcast)
  v = run1(
      [](std::span<const Tensor> in) { return std::vector<Tensor>{trace::matmul(in[0], in[1])}; },
      {Array::from<float>({3}, {1, 1, 1}),
       Array::from<float>({2, 3, 2}, {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1})});
  expect_near(v, {9, 12, 0, 3}, 0);
}

TEST(Trace, SoftmaxLogSoftmaxAreStable) {
  Array x = Array::from<float>({2, 3}, {1000, 1001, 1002, -INFINITY, 0, 0});
  auto sm = run1(
      [](std::span<const Tensor> in) { return std::vector<Tensor>{trace::softmax(in[0])}; }, {x});
  double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  expect_near(sm, {e2 / z, e1 / z, 1 / z, 0, 0.5, 0.5}, 1e-6);
  auto ls = run1(
      [](std::span<const Tensor> in) { return std::vector<Tensor>{trace::log_softmax(in[0], 1)}; },
      {x});
  EXPECT_NEAR(ls[2], -std::log(z), 1e-5);
  EXPECT_EQ(ls[3], -INFINITY);
  EXPECT_NEAR(ls[4], -std::log(2.0), 1e-6);
}

TEST(Trace, ReductionsWithKeepdimsAndNegativeAxes) {
  Array x = Array::from<float>({2, 3}, {1, 5, 3, 4, 2, 6});
  auto v = run1(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{trace::mean(in[0], {-1}, true)};
      },
      {x});
  expect_near(v, {3, 4}, 1e-6);
  v = run1([](std::span<const Tensor> in) { return std::vector<Tensor>{trace::max(in[0], {0})}; },
           {x});
  expect_near(v, {4, 5, 6}, 0);
  v = run1([](std::span<const Tensor> in) { return std::vector<Tensor>{trace::sum(in[0])}; }, {x});
  expect_near(v, {21}, 0);
}

TEST(Trace, GeluTanhFormAndRelu) {
  Array x = Array::from<float>({4}, {-2, -0.5f, 0, 1.5f});
  auto g = run1(
      [](std::span<const Tensor> in) { return std::vector<Tensor>{composites::gelu(in[0])}; }, {x});
  for (int i = 0; i < 4; ++i) {
    double t = x.at(i);
    double want = 0.5 * t * (1 + std::tanh(std::sqrt(2 / M_PI) * (t + 0.044715 * t * t * t)));
    EXPECT_NEAR(g[size_t(i)], want, 1e-6);
  }
  auto r =
      run1([](std::span<const Tensor> in) { return std::vector<Tensor>{trace::relu(in[0])}; }, {x});
  expect_near(r, {0, 0, 0, 1.5}, 0);
}

TEST(Trace, ShapeHelpers) {
  Array x = Array::from<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto v = run1(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{trace::reshape(trace::transpose(in[0]), {-1})};
      },
      {x});
  expect_near(v, {0, 3, 1, 4, 2, 5}, 0);
  v = run1(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{trace::slice(in[0], 1, 0, 3, 2)};
      },
      {x});
  expect_near(v, {0, 2, 3, 5}, 0);
  v = run1(
      [](std::span<const Tensor> in) {
        return std::vector<Tensor>{trace::take_rows(in[0], in[1])};
      },
      {x, Array::from<int32_t>({3}, {1, 0, 1})});
  expect_near(v, {3, 4, 5, 0, 1, 2, 3, 4, 5}, 0);
  v = run1([](std::span<const Tensor> in) { return std::vector<Tensor>{trace::one_hot(in[0], 3)}; },
           {Array::from<int32_t>({2}, {2, 0})});
  expect_near(v, {0, 0, 1, 1, 0, 0}, 0);
}

TEST(Trace, CaptureErrorsAreClear) {
  EXPECT_THROW(trace::current_builder(), Error);
  EXPECT_THROW(trace::capture([](std::span<const Tensor> in) { return std::vector<Tensor>{in[0]}; },
                              {{DType::f32, {2}}}, {"a", "b"}),
               Error);
  EXPECT_THROW(
      trace::capture([](std::span<const Tensor> in) { return std::vector<Tensor>{in[0] + in[1]}; },
                     {{DType::f32, {2}}, {DType::s32, {2}}}),
      Error);
  // Running with the wrong number of inputs names the count.
  auto exe = runtime::host::compile(
      trace::capture([](std::span<const Tensor> in) { return std::vector<Tensor>{in[0] * 2.0}; },
                     {{DType::f32, {2}}}));
  std::vector<Array> none;
  try {
    exe->run(none);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected 1 inputs, got 0"), std::string::npos)
        << e.what();
  }
}
