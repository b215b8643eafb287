// Attention instances whose rows all see a key (causal without a key mask, S <= T) decompose to
// the plain softmax (attention.cpp): a row whose visible scores are all -inf, or hold a NaN,
// gives NaN out and log-sum-exp, and NaN gradients wherever that row's weights reach (as
// PyTorch's and JAX's softmax do). The host kernels against the interpreted decomposition, f64,
// f32 and bf16, with those scores from finite inputs (overflow: the GEMM paths) and from inf /
// NaN inputs (the dense paths). The same inputs with a key mask that hides nothing take the
// guarded softmax: that row's log-sum-exp is -inf there.
#include <fmt/format.h>

#include <cmath>

#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

// B 1, two heads, S = T = 4, so row 0 sees key 0 only. (Another query head on kv head 0 would
// see the large k entries through rows whose gradient is a cancellation, dp - delta = 0.)
constexpr int64_t kHq = 2, kHkv = 2, kS = 4, kT = 4, kD = 5, kDv = 3;

enum Case { overflow_row, inf_row, overflow_inf, nan_q };  // in this order

// q and k with dims 0..2 of q zero except the case's entries (so the large k entries reach no
// other score), in head 0 / kv head 0:
//   overflow_row: q[row 0] · k[key 0] = big · -big = -inf, row 0's only visible score;
//   inf_row: the same with q = +inf;
//   overflow_inf: q[row 2] · k[key 1] = big·big = +inf, so s - max is NaN there;
//   nan_q: q[row 2] holds a NaN.
std::vector<Array> inputs(DType dt, Case c) {
  const double big = dt == DType::f64 ? 1e200 : 1e30;
  std::vector<double> q = lcg_doubles(kHq * kS * kD, 61), k = lcg_doubles(kHkv * kT * kD, 62);
  for (int64_t r = 0; r < kHq * kS; ++r)
    for (int64_t d = 0; d < 3; ++d) q[size_t(r * kD + d)] = 0;
  auto qat = [&](int64_t row, int64_t d) -> double& { return q[size_t(row * kD + d)]; };
  auto kat = [&](int64_t key, int64_t d) -> double& { return k[size_t(key * kD + d)]; };
  if (c == overflow_row || c == inf_row) {
    qat(0, 0) = c == inf_row ? kInf : big;
    kat(0, 0) = -big;
  }
  if (c == overflow_inf) {
    qat(2, 1) = big;
    kat(1, 1) = big;
  }
  if (c == nan_q) qat(2, 3) = kNaN;
  return {Array::from_doubles(dt, {1, kHq, kS, kD}, q),
          Array::from_doubles(dt, {1, kHkv, kT, kD}, k), lcg_array(dt, {1, kHkv, kT, kDv}, 63)};
}

TEST(HostAttentionPlainSoftmax, CornerRowsAsTheDecomposition) {
  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    const DType rt = dt == DType::bf16 ? DType::f32 : dt;  // out, lse, d_out
    const double tol = dt == DType::f64 ? 1e-11 : dt == DType::f32 ? 2e-5 : 5e-2;
    for (int cm = 0; cm < 8; ++cm) {
      const Case c = Case(cm % 4);
      const bool masked = cm >= 4;  // an all-true key mask: the guarded softmax
      SCOPED_TRACE(fmt::format("{} case {} masked {}", name(dt), int(c), masked));
      std::vector<Array> in = inputs(dt, c);
      if (masked) in.push_back(Array::from(Shape{1, kT}, std::vector<bool>(size_t(kT), true)));
      std::vector<ir::TensorType> types;
      for (auto& a : in) types.push_back({a.dtype(), a.shape()});
      auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
        return cop::attention(b, p[0], p[1], p[2], masked ? p[3] : -1, 0.5, true);
      });
      const std::vector<Array> out = run_all(fwd, in);
      const std::vector<Array> want = passes::interpret(passes::expand_composites(fwd), in);
      // The special row (head 0, row 0 or 2): plain, NaN in out and log-sum-exp; guarded, its
      // log-sum-exp -inf. Other rows finite.
      const int64_t row = c == overflow_row || c == inf_row ? 0 : 2;
      if (masked) {
        ASSERT_EQ(want[1].at(row), -kInf);
      } else {
        ASSERT_TRUE(std::isnan(want[1].at(row)));
        ASSERT_TRUE(std::isnan(want[0].at(row * kDv)));
      }
      ASSERT_TRUE(std::isfinite(want[1].at(row == 0 ? 1 : 0)));
      for (size_t r = 0; r < 2; ++r) expect_values(out[r], want[r].to_doubles(), tol);
      // Backward from the decomposition's out and log-sum-exp.
      std::vector<Array> gin = {in[0],   in[1],   in[2],
                                want[0], want[1], lcg_array(rt, want[0].shape(), 64)};
      if (masked) gin.push_back(in[3]);
      std::vector<ir::TensorType> gtypes;
      for (auto& a : gin) gtypes.push_back({a.dtype(), a.shape()});
      auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
        return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], masked ? p[6] : -1, 0.5,
                                   true);
      });
      const std::vector<Array> g = run_all(bwd, gin);
      const std::vector<Array> gwant = passes::interpret(passes::expand_composites(bwd), gin);
      // Plain, that row's p is NaN for every key, hidden ones too (exp(-inf - NaN)): kv head
      // 0's dk and dv are NaN throughout. Kv head 1's are finite.
      ASSERT_TRUE(masked || std::isnan(gwant[2].at(kT * kDv - 1)));
      ASSERT_TRUE(std::isfinite(gwant[2].at(kT * kDv)));
      for (size_t r = 0; r < 3; ++r) {
        SCOPED_TRACE(fmt::format("gradient {}", r));
        expect_values(g[r], gwant[r].to_doubles(), tol);
      }
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
