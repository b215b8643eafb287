// The fused attention kernels against the composites' decomposition run by the IR interpreter
// (the composite's meaning), for MHA / GQA / MQA, causal with S < T, key masks with rows that
// see no key, several key tiles, f64 and f32.
#include "kernel_test_util.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/trace/composite.h"

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
  auto fwd = one_op(types, [&](ir::Builder& b, auto& p) {
    return b.attention(p[0], p[1], p[2], c.mask ? p[3] : -1, scale, c.causal);
  });
  Array out = run_all(fwd, in)[0];
  Array want = passes::interpret(trace::expand_composites(fwd), in)[0];
  expect_values(out, want.to_doubles(), tol);

  // Backward on the kernel's own forward output and a random cotangent (lse column included).
  std::vector<Array> gin = {in[0], in[1], in[2], out, lcg_array(dt, out.shape(), 4)};
  std::vector<ir::TensorType> gtypes = {types[0], types[1], types[2], types[0], types[0]};
  gtypes[3] = gtypes[4] = {dt, out.shape()};
  if (c.mask) {
    gin.push_back(in[3]);
    gtypes.push_back(types[3]);
  }
  auto bwd = one_op(gtypes, [&](ir::Builder& b, auto& p) {
    return b.attention_grad(p[0], p[1], p[2], p[3], p[4], c.mask ? p[5] : -1, scale, c.causal);
  });
  Array g = run_all(bwd, gin)[0];
  Array gwant = passes::interpret(trace::expand_composites(bwd), gin)[0];
  expect_values(g, gwant.to_doubles(), tol);
}

KERNEL_TEST(attention, mha_gqa_mqa_masks_tiles) {
  for (const Cfg& c : kCfgs) {
    check(DType::f64, c, 1e-12);
    check(DType::f32, c, 2e-5);
  }
}

// Registered for the op walk; the cases run in attention_mha_gqa_mqa_masks_tiles.
KERNEL_TEST(attention_grad, covered_with_attention) {
  auto f = one_op({{DType::f64, {1, 1, 1, 1}},
                   {DType::f64, {1, 1, 1, 1}},
                   {DType::f64, {1, 1, 1, 1}},
                   {DType::f64, {1, 1, 1, 2}},
                   {DType::f64, {1, 1, 1, 2}}},
                  [](ir::Builder& b, auto& p) {
                    return b.attention_grad(p[0], p[1], p[2], p[3], p[4], -1, 0.5, false);
                  });
  // One key: p = 1, ds = do·v - do·o + dlse = 0.5 -> dq = 0.5·ds·k, dk = 0.5·ds·q, dv = do.
  auto r =
      run_all(f, {Array::from<double>({1, 1, 1, 1}, {2}), Array::from<double>({1, 1, 1, 1}, {3}),
                  Array::from<double>({1, 1, 1, 1}, {5}), Array::from<double>({1, 1, 1, 2}, {5, 3}),
                  Array::from<double>({1, 1, 1, 2}, {1, 0.5})});
  expect_values(r[0], {0.75, 0.5, 1});
}

}  // namespace
}  // namespace tlaloc::host_test
