// The fused cross_entropy kernels against the composites' decomposition run by the IR
// interpreter (the composite's meaning): rows of 5, 9 and 256 classes (the benchmark LM's
// logits, split over threads), f64 and f32, and rows with -inf logits on wrong classes, all
// -inf, a NaN, logits of ±1e8 and labels outside [0, C). run_all also checks fused / unfused
// and 1 / 2 threads agree bitwise.
#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

void check(DType dt, int64_t N, int64_t C, std::vector<double> x, std::vector<int32_t> labels,
           double tol) {
  SCOPED_TRACE(fmt::format("{} [{}, {}]", name(dt), N, C));
  std::vector<Array> in = {Array::from_doubles(dt, {N, C}, x), Array::from(Shape{N}, labels)};
  auto fwd = one_op({{dt, {N, C}}, {DType::s32, {N}}},
                    [](ir::Builder& b, auto& p) { return cop::cross_entropy(b, p[0], p[1]); });
  expect_values(run_all(fwd, in)[0],
                passes::interpret(passes::expand_composites(fwd), in)[0].to_doubles(), tol);
  in.push_back(Array::from_doubles(dt, {N}, lcg_doubles(N, 9, 0.5, 2)));
  auto bwd = one_op({{dt, {N, C}}, {DType::s32, {N}}, {dt, {N}}}, [](ir::Builder& b, auto& p) {
    return cop::cross_entropy_grad(b, p[0], p[1], p[2]);
  });
  expect_values(run_all(bwd, in)[0],
                passes::interpret(passes::expand_composites(bwd), in)[0].to_doubles(), tol);
}

std::vector<int32_t> labels(int64_t N, int64_t C) {
  std::vector<int32_t> l;
  for (int64_t r = 0; r < N; ++r) l.push_back(int32_t((r * 7 + 3) % C));
  return l;
}

KERNEL_TEST(cross_entropy, shapes_dtypes) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{3, 5}, {37, 9}, {64, 256}})
    for (DType dt : {DType::f64, DType::f32})
      check(dt, N, C, lcg_doubles(N * C, uint64_t(N), -4, 4), labels(N, C),
            dt == DType::f64 ? 1e-12 : 2e-5);
}

// Row 0: -inf on two wrong classes; 1: all -inf (NaN, as the decomposition); 2: a NaN logit;
// 3: logits of ±1e8 (the label's loss 0, exactly); 4 and 5: labels -1 and C (loss -0, gradient 0:
// the loss does not depend on that row's logits).
KERNEL_TEST(cross_entropy_grad, infinities_nan_large_labels_out_of_range) {
  const double inf = kInf;
  const std::vector<double> x = {0.5, -inf, 1,    -inf, 2, -inf, -inf, -inf, -inf, -inf,
                                 1,   2,    kNaN, 0,    1, 1e8,  -1e8, 0,    3,    1e8,
                                 0,   1,    2,    3,    4, 0,    1,    2,    3,    4};
  for (DType dt : {DType::f64, DType::f32})
    check(dt, 6, 5, x, {2, 0, 1, 0, -1, 5}, dt == DType::f64 ? 1e-12 : 2e-5);
}

// The gradient converted to bf16 (autocast's LM head: its two GEMMs read it), through a reshape
// or not, with the loss beside it: fused, the kernel writes the bf16 itself; the bits of the
// unfused convert (run_all), near the decomposition's gradient rounded to bf16; rows with a NaN
// logit and an out-of-range label included.
KERNEL_TEST(cross_entropy_grad, gradient_converted_to_bf16) {
  const int64_t N = 6, C = 40;
  std::vector<double> x = lcg_doubles(N * C, 21, -6, 6);
  x[size_t(2 * C + 7)] = kNaN;
  std::vector<int32_t> l = labels(N, C);
  l[4] = -1;
  const std::vector<Array> in = {Array::from_doubles(DType::f32, {N, C}, x),
                                 Array::from(Shape{N}, l),
                                 Array::from_doubles(DType::f32, {N}, lcg_doubles(N, 22, 0.5, 2))};
  const std::vector<ir::TensorType> types = {
      {DType::f32, {N, C}}, {DType::s32, {N}}, {DType::f32, {N}}};
  auto plain = one_op(
      types, [](ir::Builder& b, auto& p) { return cop::cross_entropy_grad(b, p[0], p[1], p[2]); });
  const Array g = passes::interpret(passes::expand_composites(plain), in)[0];
  for (bool reshaped : {false, true}) {
    SCOPED_TRACE(reshaped);
    auto f = one_op_results(types, [&](ir::Builder& b, auto& p) {
      auto r = b.composite(ir::Op::cross_entropy_grad, {p[0], p[1], p[2]});
      const ir::ValueId d = reshaped ? b.reshape(r[0], Shape{2, N / 2, C}) : r[0];
      return std::vector<ir::ValueId>{b.convert(d, DType::bf16), r[1]};
    });
    const std::vector<Array> got = run_all(f, in);
    ASSERT_EQ(got[0].dtype(), DType::bf16);
    std::vector<double> want;
    for (int64_t i = 0; i < N * C; ++i) want.push_back(round_to(DType::bf16, g.at(i)));
    expect_values(got[0], want, 0x1p-7);
  }
}

}  // namespace
}  // namespace tlaloc::host_test
