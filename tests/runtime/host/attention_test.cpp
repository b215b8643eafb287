// The fused attention kernels against the composites' decomposition run by the IR interpreter
// (the composite's meaning), for MHA / GQA / MQA, causal with S < T and S > T, key masks with
// rows that see no key, several key tiles and query blocks, f64 and f32.
#include <fmt/format.h>

#include <cmath>

#include "kernel_test_util.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::host_test {
namespace {

struct Cfg {
  int64_t B, Hq, S, D, Hkv, T, Dv;
  bool causal, mask;
};

const Cfg kCfgs[] = {
    {2, 4, 5, 3, 4, 5, 3, true, false},    // MHA causal
    {2, 4, 3, 4, 2, 7, 2, true, true},     // GQA, causal bottom-right, mask
    {1, 3, 4, 2, 1, 4, 5, false, true},    // MQA, mask only
    {2, 3, 4, 2, 3, 6, 5, true, true},     // MHA (the decomposition's 4-D layout), S < T, mask
    {2, 3, 6, 2, 3, 4, 3, true, true},     // MHA, causal S > T, mask
    {1, 2, 70, 8, 1, 75, 8, true, false},  // several key tiles
    // f32 without a mask: the GEMM path (attention_gemm.h), blocks of 64 query rows
    {1, 4, 150, 16, 2, 100, 8, true, false},   // causal S > T: rows 0..49 see no key
    {2, 2, 130, 8, 1, 90, 12, false, false},   // not causal, a last block of 2 rows
    {1, 2, 129, 16, 2, 200, 16, true, false},  // causal S < T
};

// Mask: batch 0 hides key 1; the last batch hides keys 0..2 (with causal, early rows see none).
Array key_mask(const Cfg& c) {
  std::vector<bool> m(size_t(c.B * c.T), true);
  m[1] = false;
  for (int64_t j = 0; j < 3 && j < c.T; ++j) m[size_t((c.B - 1) * c.T + j)] = false;
  return Array::from(Shape{c.B, c.T}, m);
}

void check(DType dt, const Cfg& c, double tol) {
  SCOPED_TRACE(fmt::format("{} B{} Hq{} S{} D{} Hkv{} T{} Dv{} causal {} mask {}", name(dt), c.B,
                           c.Hq, c.S, c.D, c.Hkv, c.T, c.Dv, c.causal, c.mask));
  std::vector<Array> in = {lcg_array(dt, {c.B, c.Hq, c.S, c.D}, 1),
                           lcg_array(dt, {c.B, c.Hkv, c.T, c.D}, 2),
                           lcg_array(dt, {c.B, c.Hkv, c.T, c.Dv}, 3)};
  std::vector<ir::TensorType> types;
  for (auto& a : in) types.push_back({a.dtype(), a.shape()});
  if (c.mask) {
    in.push_back(key_mask(c));
    types.push_back({DType::i1, in.back().shape()});
  }
  const double scale = 0.8;
  auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
    return cop::attention(b, p[0], p[1], p[2], c.mask ? p[3] : -1, scale, c.causal);
  });
  std::vector<Array> out = run_all(fwd, in);
  std::vector<Array> want = passes::interpret(passes::expand_composites(fwd), in);
  for (size_t r = 0; r < 2; ++r) expect_values(out[r], want[r].to_doubles(), tol);

  // Backward on the kernel's own forward output and log-sum-exp and a random cotangent.
  std::vector<Array> gin = {in[0], in[1], in[2], out[0], out[1], lcg_array(dt, out[0].shape(), 4)};
  std::vector<ir::TensorType> gtypes = {types[0], types[1], types[2]};
  for (size_t i = 3; i < 6; ++i) gtypes.push_back({dt, gin[i].shape()});
  if (c.mask) {
    gin.push_back(in[3]);
    gtypes.push_back(types[3]);
  }
  auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
    return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], c.mask ? p[6] : -1, scale,
                               c.causal);
  });
  std::vector<Array> g = run_all(bwd, gin);
  std::vector<Array> gwant = passes::interpret(passes::expand_composites(bwd), gin);
  for (size_t r = 0; r < 3; ++r) expect_values(g[r], gwant[r].to_doubles(), tol);
}

KERNEL_TEST(attention, mha_gqa_mqa_masks_tiles) {
  for (const Cfg& c : kCfgs) {
    check(DType::f64, c, 1e-12);
    check(DType::f32, c, 2e-5);
  }
}

// One key: s = scale·q·k = 3 = lse, so p = 1; ds = do·v - do·o = 0.5 -> dq = 0.5·ds·k,
// dk = 0.5·ds·q, dv = p·do.
KERNEL_TEST(attention_grad, one_key_by_hand) {
  auto f = one_op_results({{DType::f64, {1, 1, 1, 1}},
                           {DType::f64, {1, 1, 1, 1}},
                           {DType::f64, {1, 1, 1, 1}},
                           {DType::f64, {1, 1, 1, 1}},
                           {DType::f64, {1, 1, 1}},
                           {DType::f64, {1, 1, 1, 1}}},
                          [](ir::Builder& b, auto& p) {
                            return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], -1,
                                                       0.5, false);
                          });
  auto d = [](Shape s, double v) { return Array::from<double>(s, {v}); };
  auto r = run_all(f, {d({1, 1, 1, 1}, 2), d({1, 1, 1, 1}, 3), d({1, 1, 1, 1}, 5),
                       d({1, 1, 1, 1}, 4.5), d({1, 1, 1}, 3), d({1, 1, 1, 1}, 1)});
  expect_values(r[0], {0.75});
  expect_values(r[1], {0.5});
  expect_values(r[2], {1});
}

// Inf and NaN in slots a query does not see (a masked key, a future key with causal, a row
// with no visible key): the kernels give what the decomposition gives, which is PyTorch's and
// JAX's reference attention (masked scores -inf, then softmax · v): a hidden key's non-finite k
// changes nothing in the forward, a hidden non-finite v makes that output column NaN (0 · inf),
// and in the backward they reach the gradients through the zero weights.
KERNEL_TEST(attention, non_finite_hidden_slots_as_the_decomposition) {
  const double inf = kInf;
  for (DType dt : {DType::f64, DType::f32}) {
    for (int which = 0; which < 6; ++which) {
      SCOPED_TRACE(fmt::format("{} case {}", name(dt), which));
      const Cfg c{2, 4, 3, 4, 2, 5, 3, which % 2 == 0, true};
      std::vector<Array> in = {lcg_array(dt, {c.B, c.Hq, c.S, c.D}, 11),
                               lcg_array(dt, {c.B, c.Hkv, c.T, c.D}, 12),
                               lcg_array(dt, {c.B, c.Hkv, c.T, c.Dv}, 13), key_mask(c)};
      // Key 1 of batch 0 is masked; with causal, key 4 is after every query row but the last
      // (S = 3 rows bottom-aligned on T = 5 keys: row 0 sees keys 0..2).
      const int64_t key = which < 2 ? 1 : 4;
      auto set = [&](Array& a, int64_t width, int64_t d, double v) {
        std::vector<double> x = a.to_doubles();
        x[size_t(key * width + d)] = v;  // batch 0, kv head 0
        a = Array::from_doubles(dt, a.shape(), x);
      };
      if (which < 2 || which == 2) set(in[2], c.Dv, 1, which == 0 ? inf : std::nan(""));
      if (which == 3) set(in[1], c.D, 2, -inf);
      if (which == 4) set(in[2], c.Dv, 0, -inf);
      if (which == 5) set(in[1], c.D, 0, std::nan(""));
      std::vector<ir::TensorType> types;
      for (auto& x : in) types.push_back({x.dtype(), x.shape()});
      auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
        return cop::attention(b, p[0], p[1], p[2], p[3], 0.7, c.causal);
      });
      std::vector<Array> out = run_all(fwd, in);
      std::vector<Array> want = passes::interpret(passes::expand_composites(fwd), in);
      for (size_t r = 0; r < 2; ++r) expect_values(out[r], want[r].to_doubles(), 1e-5);
      std::vector<Array> gin = {
          in[0], in[1], in[2], want[0], want[1], lcg_array(dt, want[0].shape(), 14), in[3]};
      std::vector<ir::TensorType> gtypes;
      for (auto& x : gin) gtypes.push_back({x.dtype(), x.shape()});
      auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
        return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], p[6], 0.7, c.causal);
      });
      std::vector<Array> g = run_all(bwd, gin);
      std::vector<Array> gwant = passes::interpret(passes::expand_composites(bwd), gin);
      for (size_t r = 0; r < 3; ++r) {
        SCOPED_TRACE(fmt::format("gradient {}", r));
        expect_values(g[r], gwant[r].to_doubles(), 1e-5);
      }
    }
  }
}

// NaN scores a query sees (a NaN in q, or a whole 32-key tile of NaN keys), without a mask or
// causal, so the plain softmax (every row sees a key): that row's output and log-sum-exp are
// NaN; and a NaN log-sum-exp fed to the gradient makes that row's p NaN for every key, as in
// the decomposition. (The guarded softmax's NaN rows: attention_plain_softmax_test.cpp.)
KERNEL_TEST(attention, nan_scores_as_the_decomposition) {
  for (DType dt : {DType::f64, DType::f32}) {
    for (int which = 0; which < 3; ++which) {
      SCOPED_TRACE(fmt::format("{} case {}", name(dt), which));
      const int64_t T = which == 1 ? 64 : 5;
      std::vector<Array> in = {lcg_array(dt, {1, 2, 3, 4}, 21), lcg_array(dt, {1, 1, T, 4}, 22),
                               lcg_array(dt, {1, 1, T, 4}, 23)};
      auto poke = [&](Array& a, int64_t at, int64_t count) {
        std::vector<double> x = a.to_doubles();
        for (int64_t i = at; i < at + count; ++i) x[size_t(i)] = std::nan("");
        a = Array::from_doubles(dt, a.shape(), x);
      };
      if (which == 0) poke(in[0], 0, 1);       // q of head 0, row 0
      if (which == 1) poke(in[1], 0, 32 * 4);  // keys 0..31: a whole tile
      std::vector<ir::TensorType> types;
      for (auto& x : in) types.push_back({x.dtype(), x.shape()});
      auto fwd = one_op_results(types, [&](ir::Builder& b, auto& p) {
        return cop::attention(b, p[0], p[1], p[2], -1, 0.5, false);
      });
      std::vector<Array> out = run_all(fwd, in);
      std::vector<Array> want = passes::interpret(passes::expand_composites(fwd), in);
      for (size_t r = 0; r < 2; ++r) expect_values(out[r], want[r].to_doubles(), 1e-5);
      Array lse = want[1];
      if (which == 2) poke(lse, 1, 1);  // a NaN log-sum-exp fed to the gradient
      std::vector<Array> gin = {in[0],   in[1], in[2],
                                want[0], lse,   lcg_array(dt, want[0].shape(), 24)};
      std::vector<ir::TensorType> gtypes;
      for (auto& x : gin) gtypes.push_back({x.dtype(), x.shape()});
      auto bwd = one_op_results(gtypes, [&](ir::Builder& b, auto& p) {
        return cop::attention_grad(b, p[0], p[1], p[2], p[3], p[4], p[5], -1, 0.5, false);
      });
      std::vector<Array> g = run_all(bwd, gin);
      std::vector<Array> gwant = passes::interpret(passes::expand_composites(bwd), gin);
      for (size_t r = 0; r < 3; ++r) expect_values(g[r], gwant[r].to_doubles(), 1e-5);
    }
  }
}

}  // namespace
}  // namespace tlaloc::host_test
