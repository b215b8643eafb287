// The fused attention kernels against the composites' decomposition run by the IR interpreter
// (the composite's meaning), for MHA / GQA / MQA, causal with S < T, key masks with rows that
// see no key, several key tiles, f64 and f32.
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
    {1, 2, 70, 8, 1, 75, 8, true, false},  // several key tiles
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

}  // namespace
}  // namespace tlaloc::host_test
