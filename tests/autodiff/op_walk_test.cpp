// Walks ir::kAllOps: every op either has finite-difference cases here (f64 central differences
// against the VJP transform) or is listed as not differentiable. Adding an op to ops.def
// without either fails OpWalk.EveryOpIsCovered; adding a case without a VJP rule fails the
// case itself.
#include <map>
#include <set>

#include "harness.h"
#include "tests/support/composite_ops.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/trace/conv.h"
#include "tlaloc/trace/window.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using ir::Op;
using ir::ReduceKind;
using trace::Tensor;
using Dims = std::vector<int64_t>;

namespace {

struct Case {
  std::string label;
  std::vector<Array> x;  // example point; inputs take these types
  trace::TraceFn fn;
  double h = 1e-6;
  double tol2 = 1e-6;  // second-order tolerance
  // False where the VJP uses select_and_scatter, whose own VJP (in its source) is refused.
  bool second_order = true;
};

ir::Builder& B() { return trace::current_builder(); }
Tensor T(ir::ValueId v) { return Tensor(&B(), v); }
std::vector<Tensor> Ts(const std::vector<ir::ValueId>& vs) {
  std::vector<Tensor> out;
  for (ir::ValueId v : vs) out.push_back(T(v));
  return out;
}
Tensor s32(int v) { return trace::scalar(v, DType::s32); }
Tensor idx(Shape s, std::vector<int32_t> v) { return trace::constant(Array::from(s, v)); }

// Unary op on x in [lo, hi).
Case unary_case(Op op, double lo, double hi) {
  return {
      std::string(ir::op_name(op)), {uniform({2, 3}, 1, lo, hi)}, [op](std::span<const Tensor> a) {
        return std::vector<Tensor>{T(B().unary(op, a[0].id()))};
      }};
}

// Shuffled distinct values spaced 0.05 apart: no ties within a window (max / min pooling).
Array distinct(Shape s, uint64_t seed) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  uint64_t r = seed;
  for (size_t i = v.size(); i > 1; --i) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(v[i - 1], v[size_t((r >> 33) % i)]);
  }
  for (double& e : v) e = e * 0.05 - 1;
  return f64(s, v);
}

Case binary_case(Op op, Array a, Array b) {
  return {
      std::string(ir::op_name(op)), {std::move(a), std::move(b)}, [op](std::span<const Tensor> x) {
        return std::vector<Tensor>{T(B().binary(op, x[0].id(), x[1].id()))};
      }};
}

// b = a + offsets that keep the two apart (no ties) for maximum / minimum.
Array apart(const Array& a) {
  std::vector<double> v = a.to_doubles();
  for (size_t i = 0; i < v.size(); ++i) v[i] += i % 2 ? 0.3 : -0.4;
  return f64(a.shape(), v);
}

std::map<Op, std::vector<Case>> cases() {
  std::map<Op, std::vector<Case>> m;
  auto add = [&](Op op, Case c) { m[op].push_back(std::move(c)); };
  // convert: through f32 and back; values and step are exact in f32, so the FD is exact.
  add(Op::convert, {"f64->f32->f64",
                    {f64({4}, {0.5, -1.25, 2.0, 0.375})},
                    [](std::span<const Tensor> a) {
                      Tensor y = trace::astype(trace::astype(a[0], DType::f32), DType::f64);
                      return std::vector<Tensor>{y * a[0]};
                    },
                    1.0 / 64,
                    1e-5});  // second order: the cotangent is rounded to f32 on the way back
  add(Op::broadcast_in_dim,
      {"[3]->[2,3]", {uniform({3}, 2)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{T(B().broadcast_in_dim(a[0].id(), {2, 3}, {1}))};
       }});
  add(Op::broadcast_in_dim,
      {"[3,1]->[3,4] expand", {uniform({3, 1}, 3)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{T(B().broadcast_in_dim(a[0].id(), {3, 4}, {0, 1}))};
       }});
  add(Op::broadcast_in_dim,
      {"[2,1,3]->[3,4,2,5] unsorted dims", {uniform({2, 1, 3}, 4)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{T(B().broadcast_in_dim(a[0].id(), {3, 4, 2, 5}, {2, 1, 0}))};
       }});
  add(Op::reshape, {"[2,3]->[3,2]", {uniform({2, 3}, 5)}, [](std::span<const Tensor> a) {
                      return std::vector<Tensor>{T(B().reshape(a[0].id(), {3, 2}))};
                    }});
  add(Op::transpose, {"[2,3,4] perm 2,0,1", {uniform({2, 3, 4}, 6)}, [](std::span<const Tensor> a) {
                        return std::vector<Tensor>{T(B().transpose(a[0].id(), {2, 0, 1}))};
                      }});
  add(Op::slice, {"strided", {uniform({5, 7}, 7)}, [](std::span<const Tensor> a) {
                    return std::vector<Tensor>{T(B().slice(a[0].id(), {1, 0}, {5, 6}, {2, 3}))};
                  }});
  add(Op::slice, {"contiguous", {uniform({4, 3}, 8)}, [](std::span<const Tensor> a) {
                    return std::vector<Tensor>{T(B().slice(a[0].id(), {1, 1}, {3, 3}))};
                  }});
  add(Op::concatenate, {"3 operands on dim 1",
                        {uniform({2, 1}, 9), uniform({2, 3}, 10), uniform({2, 2}, 11)},
                        [](std::span<const Tensor> a) {
                          return std::vector<Tensor>{trace::concat({a[0], a[1], a[2]}, 1)};
                        }});
  add(Op::pad,
      {"edge + interior, value is an input",
       {uniform({2, 3}, 12), f64({}, {0.25})},
       [](std::span<const Tensor> a) {
         return std::vector<Tensor>{T(B().pad(a[0].id(), a[1].id(), {1, 0}, {0, 2}, {1, 1}))};
       }});
  add(Op::dynamic_slice,
      {"starts 1 and 7 (clamped to 2)", {uniform({4, 5}, 13)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{trace::dynamic_slice(a[0], {s32(1), s32(7)}, {2, 3})};
       }});
  add(Op::dynamic_update_slice,
      {"update and operand",
       {uniform({4, 5}, 14), uniform({2, 2}, 15)},
       [](std::span<const Tensor> a) {
         Tensor y = trace::dynamic_update_slice(a[0], a[1], {s32(2), s32(-1)});
         return std::vector<Tensor>{y * y};
       }});
  add(Op::gather,
      {"repeated and clamped rows", {uniform({4, 3}, 16)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{trace::take_rows(a[0], idx({5}, {0, 2, 2, 3, -1}))};
       }});
  add(Op::gather, {"indices [2,2]", {uniform({3, 2}, 17)}, [](std::span<const Tensor> a) {
                     return std::vector<Tensor>{trace::take_rows(a[0], idx({2, 2}, {2, 0, 1, 2}))};
                   }});
  add(Op::gather, {"indices are an input (clamped)",
                   {uniform({4, 3}, 40), Array::from<int32_t>({3}, {3, -2, 9})},
                   [](std::span<const Tensor> a) {
                     return std::vector<Tensor>{trace::take_rows(a[0], a[1])};
                   }});
  add(Op::scatter,
      {"indices are an input (masked)",
       {uniform({4, 3}, 41), Array::from<int32_t>({3}, {0, -1, 4}), uniform({3, 3}, 42)},
       [](std::span<const Tensor> a) {
         Tensor y = T(B().scatter(a[0].id(), a[1].id(), a[2].id()));
         return std::vector<Tensor>{y * y};
       }});
  add(Op::scatter, {"repeated and skipped rows",
                    {uniform({4, 3}, 18), uniform({3, 3}, 19)},
                    [](std::span<const Tensor> a) {
                      Tensor y = T(B().scatter(a[0].id(), idx({3}, {1, 1, 5}).id(), a[1].id()));
                      return std::vector<Tensor>{y * y};
                    }});
  add(Op::dot_general,
      {"matmul", {uniform({2, 3}, 20), uniform({3, 4}, 21)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{trace::matmul(a[0], a[1])};
       }});
  add(Op::dot_general,
      {"batched", {uniform({2, 3, 4}, 22), uniform({2, 4, 2}, 23)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{trace::matmul(a[0], a[1])};
       }});
  add(Op::dot_general, {"batch not leading, two contracting dims",
                        {uniform({3, 2, 4, 2}, 24), uniform({2, 5, 2, 4}, 25)},
                        [](std::span<const Tensor> a) {
                          return std::vector<Tensor>{
                              T(B().dot_general(a[0].id(), a[1].id(), {{1}, {2}, {2, 3}, {3, 0}}))};
                        }});
  add(Op::dot_general,
      {"same operand twice", {uniform({3, 3}, 26)}, [](std::span<const Tensor> a) {
         return std::vector<Tensor>{T(B().dot_general(a[0].id(), a[0].id(), {{}, {}, {0}, {0}}))};
       }});
  add(Op::reduce, {"sum over 0,2", {uniform({2, 3, 4}, 27)}, [](std::span<const Tensor> a) {
                     return std::vector<Tensor>{trace::sum(a[0], {0, 2})};
                   }});
  add(Op::reduce, {"max over 1", {uniform({3, 5}, 28)}, [](std::span<const Tensor> a) {
                     return std::vector<Tensor>{trace::max(a[0], {1})};
                   }});
  add(Op::reduce, {"max over 0,2", {uniform({2, 3, 2}, 43)}, [](std::span<const Tensor> a) {
                     return std::vector<Tensor>{trace::max(a[0], {0, 2})};
                   }});
  add(Op::reduce, {"min over all", {uniform({2, 3}, 29)}, [](std::span<const Tensor> a) {
                     return std::vector<Tensor>{trace::min(a[0])};
                   }});
  auto conv = [&](const char* label, Shape x, Shape w, ir::ConvOptions o, uint64_t seed) {
    add(Op::convolution,
        {label, {uniform(x, seed), uniform(w, seed + 1)}, [o](std::span<const Tensor> a) {
           return std::vector<Tensor>{trace::convolution(a[0], a[1], o)};
         }});
  };
  {
    ir::ConvOptions o;  // NCHW / OIHW, stride, padding, rhs dilation, feature groups
    o.window_strides = {2, 1};
    o.padding = {{1, 2}, {0, 1}};
    o.rhs_dilation = {1, 2};
    o.feature_group_count = 2;
    conv("stride, padding, rhs dilation, feature groups", {2, 4, 6, 5}, {6, 2, 3, 2}, o, 60);
    ir::ConvOptions n;  // NWC / WIO, lhs dilation, negative padding, batch groups
    n.lhs_dilation = {2};
    n.padding = {{-1, 2}};
    n.window_strides = {2};
    n.batch_group_count = 2;
    n.dimension_numbers = {0, 2, {1}, 1, 2, {0}, 0, 2, {1}};
    conv("NWC, lhs dilation, negative padding, batch groups", {4, 5, 3}, {2, 3, 4}, n, 62);
    ir::ConvOptions d;  // 3-D depthwise, kernel spatial dims first
    d.window_strides = {1, 2, 1};
    d.padding = {{1, 0}, {0, 0}, {1, 1}};
    d.feature_group_count = 2;
    d.dimension_numbers = {0, 1, {2, 3, 4}, 3, 4, {0, 1, 2}, 0, 1, {2, 3, 4}};
    conv("3-D depthwise, DHWIO kernel", {1, 2, 4, 4, 3}, {2, 2, 2, 1, 4}, d, 64);
  }
  add(Op::reverse, {"dims 0, 2", {uniform({2, 3, 4}, 66)}, [](std::span<const Tensor> a) {
                      return std::vector<Tensor>{T(B().reverse(a[0].id(), {0, 2}))};
                    }});
  // reduce_window: sum with padding, strides, base and window dilations (negative cotangent
  // padding cut, JAX's rule); max / min without ties (select_and_scatter's VJP).
  auto rw = [](ReduceKind k, Dims w, Dims s, Dims lo, Dims hi, Dims bd, Dims wd) {
    return [=](std::span<const Tensor> a) {
      return std::vector<Tensor>{trace::reduce_window(a[0], k, w, s, lo, hi, bd, wd)};
    };
  };
  add(Op::reduce_window, {"sum 3x3 stride 2 pad 1",
                          {uniform({2, 5, 6}, 44)},
                          rw(ReduceKind::sum, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, {}, {})});
  add(Op::reduce_window, {"sum dilated, padding past the window",
                          {uniform({4, 5}, 45)},
                          rw(ReduceKind::sum, {2, 2}, {2, 1}, {3, 0}, {1, 4}, {2, 1}, {1, 2})});
  add(Op::reduce_window, {"sum 3-d window, uneven stride",
                          {uniform({3, 4, 7}, 46)},
                          rw(ReduceKind::sum, {2, 2, 3}, {1, 2, 3}, {}, {}, {}, {})});
  Case mx{"max 2x2 stride 2 + 3x3 stride 2 pad 1",
          {distinct({2, 6, 6}, 47)},
          [](std::span<const Tensor> a) {
            return std::vector<Tensor>{
                trace::reduce_window(a[0], ReduceKind::max, {1, 2, 2}, {1, 2, 2}),
                trace::reduce_window(a[0], ReduceKind::max, {1, 3, 3}, {1, 2, 2}, {0, 1, 1},
                                     {0, 1, 1})};
          }};
  mx.second_order = false;
  add(Op::reduce_window, mx);
  Case mn{"min 3-d window, overlapping",
          {distinct({3, 4, 5}, 48)},
          rw(ReduceKind::min, {2, 2, 3}, {1, 1, 2}, {1, 0, 1}, {0, 1, 0}, {}, {})};
  mn.second_order = false;
  add(Op::reduce_window, mn);
  add(Op::reduce_window,
      {"max window-dilated, padded (picks from strided slices)",
       {distinct({2, 7, 6}, 49)},
       rw(ReduceKind::max, {1, 3, 2}, {1, 2, 1}, {0, 1, 0}, {0, 1, 1}, {}, {1, 2, 3})});
  // all_reduce sum over one replica: the identity, its VJP an all_reduce of the cotangent.
  add(Op::all_reduce,
      {"sum of x * x over one replica", {uniform({2, 3}, 71)}, [](std::span<const Tensor> a) {
         const Tensor sq = a[0] * a[0];
         return std::vector<Tensor>{
             T(B().all_reduce(sq.id(), ReduceKind::sum, ir::all_replicas(1)))};
       }});
  add(Op::negate, unary_case(Op::negate, -1, 1));
  add(Op::abs, unary_case(Op::abs, 0.1, 1));
  add(Op::abs, unary_case(Op::abs, -1, -0.1));
  add(Op::exponential, unary_case(Op::exponential, -1, 1));
  add(Op::log, unary_case(Op::log, 0.2, 2));
  add(Op::log_plus_one, unary_case(Op::log_plus_one, -0.5, 2));
  add(Op::tanh, unary_case(Op::tanh, -2, 2));
  add(Op::logistic, unary_case(Op::logistic, -3, 3));
  add(Op::sqrt, unary_case(Op::sqrt, 0.2, 3));
  add(Op::rsqrt, unary_case(Op::rsqrt, 0.2, 3));
  add(Op::sign, unary_case(Op::sign, 0.1, 1));  // derivative 0 away from 0
  add(Op::floor, unary_case(Op::floor, 0.1, 0.9));
  add(Op::cosine, unary_case(Op::cosine, -3, 3));
  add(Op::sine, unary_case(Op::sine, -3, 3));
  Array a = uniform({2, 3}, 30), b = uniform({2, 3}, 31, 0.5, 1.5);
  add(Op::add, binary_case(Op::add, a, b));
  add(Op::subtract, binary_case(Op::subtract, a, b));
  add(Op::multiply, binary_case(Op::multiply, a, b));
  add(Op::divide, binary_case(Op::divide, a, b));
  add(Op::maximum, binary_case(Op::maximum, a, apart(a)));
  add(Op::minimum, binary_case(Op::minimum, a, apart(a)));
  add(Op::power, binary_case(Op::power, uniform({2, 3}, 32, 0.3, 2), uniform({2, 3}, 33, -2, 2)));
  // remainder: a / b stays away from integers so trunc(a / b) is locally constant.
  add(Op::remainder,
      binary_case(Op::remainder, f64({4}, {5.3, -5.3, 2.9, 0.7}), f64({4}, {2.0, 2.0, -1.3, 0.5})));
  add(Op::select, {"pred from a compare",
                   {uniform({2, 3}, 34), uniform({2, 3}, 35)},
                   [](std::span<const Tensor> x) {
                     return std::vector<Tensor>{trace::where(x[0] > x[1], x[0] * x[1], x[1])};
                   }});
  add(Op::select,
      {"scalar pred", {uniform({3}, 36), uniform({3}, 37)}, [](std::span<const Tensor> x) {
         Tensor p = trace::constant(Array::scalar(false));
         return std::vector<Tensor>{T(B().select(p.id(), x[0].id(), x[1].id()))};
       }});
  add(Op::clamp, {"tensor bounds",
                  {f64({4}, {-2, 0.5, 3, 1}), uniform({4}, 38, -1, -0.5), uniform({4}, 39, 1.5, 2)},
                  [](std::span<const Tensor> x) {
                    return std::vector<Tensor>{T(B().clamp(x[1].id(), x[0].id(), x[2].id()))};
                  }});
  add(Op::clamp, {"scalar bounds",
                  {f64({4}, {-2, 0.5, 3, 1}), f64({}, {-1}), f64({}, {2})},
                  [](std::span<const Tensor> x) {
                    return std::vector<Tensor>{T(B().clamp(x[1].id(), x[0].id(), x[2].id()))};
                  }});
  // attention: GQA (4 query heads on 2 kv heads), causal + key mask; batch 1's first query
  // sees no key (output 0, gradient 0). Then MHA with the log-sum-exp column in the loss.
  add(Op::attention,
      {"GQA causal masked",
       {uniform({2, 4, 3, 2}, 40), uniform({2, 2, 4, 2}, 41), uniform({2, 2, 4, 3}, 42)},
       [](std::span<const Tensor> x) {
         Tensor mask =
             trace::constant(Array::from(Shape{2, 4}, std::vector<bool>{1, 1, 0, 1, 0, 0, 1, 1}));
         return std::vector<Tensor>{composites::attention(x[0], x[1], x[2], mask, 0.7, true)};
       }});
  add(Op::attention,
      {"MHA with lse",
       {uniform({1, 2, 3, 2}, 43), uniform({1, 2, 3, 2}, 44), uniform({1, 2, 3, 2}, 45)},
       [](std::span<const Tensor> x) {
         auto r = composites::attention_with_lse(x[0], x[1], x[2], std::nullopt, 0.5, false);
         return std::vector<Tensor>{r.out, r.lse};
       }});
  add(Op::attention_grad,
      {"MQA causal",
       {uniform({1, 2, 3, 2}, 46), uniform({1, 1, 3, 2}, 47), uniform({1, 1, 3, 2}, 48),
        uniform({1, 2, 3, 2}, 49, 0.5, 1.5), uniform({1, 2, 3}, 64, 0.5, 1.5),
        uniform({1, 2, 3, 2}, 50)},
       [](std::span<const Tensor> x) {
         ir::Builder& b = B();
         return Ts(cop::attention_grad(b, x[0].id(), x[1].id(), x[2].id(), x[3].id(), x[4].id(),
                                       x[5].id(), -1, 0.8, true));
       }});
  // layer_norm with and without bias (a large mean: LayerFD.RMSNormAndLayerNorm, whose step
  // suits it); its grad composite (second derivatives, through its decomposition).
  add(Op::layer_norm,
      {"rows of 5 with bias",
       {uniform({2, 3, 5}, 51, -2, 2), uniform({5}, 52, 0.5, 1.5), uniform({5}, 53)},
       [](std::span<const Tensor> x) {
         return std::vector<Tensor>{composites::layer_norm(x[0], x[1], x[2], 1e-5)};
       }});
  add(Op::layer_norm,
      {"offset row, no bias",
       {f64({1, 4}, {3, 4.5, 2, 3.7}), uniform({4}, 54, 0.5, 1.5)},
       [](std::span<const Tensor> x) {
         return std::vector<Tensor>{composites::layer_norm(x[0], x[1], std::nullopt, 1e-5)};
       }});
  add(Op::layer_norm_grad,
      {"rows of 4",
       {uniform({3, 4}, 55, -2, 2), uniform({4}, 56, 0.5, 1.5), uniform({3, 4}, 57)},
       [](std::span<const Tensor> x) {
         return Ts(cop::layer_norm_grad(B(), x[0].id(), x[1].id(), x[2].id(), 1e-3));
       }});
  // cross_entropy: labels in range (one row's logits large and shifted), its grad composite.
  add(Op::cross_entropy,
      {"rows of 5", {uniform({3, 5}, 58, -2, 2)}, [](std::span<const Tensor> x) {
         Tensor l = trace::constant(Array::from(Shape{3}, std::vector<int32_t>{4, 0, 2}));
         return std::vector<Tensor>{composites::cross_entropy(x[0] * 3.0, l)};
       }});
  add(Op::cross_entropy_grad,
      {"rows of 4", {uniform({2, 4}, 59, -2, 2), uniform({2}, 60)}, [](std::span<const Tensor> x) {
         Tensor l = trace::constant(Array::from(Shape{2}, std::vector<int32_t>{1, 3}));
         return std::vector<Tensor>{T(cop::cross_entropy_grad(B(), x[0].id(), l.id(), x[1].id()))};
       }});
  // gelu over both tanh branches; its grad composite (second derivatives: its rule's gelu'' in
  // plain ops, which takes y = gelu(x) as the forward gives it).
  add(Op::gelu, {"values in [-4, 4]", {uniform({2, 5}, 61, -4, 4)}, [](std::span<const Tensor> x) {
                   return std::vector<Tensor>{T(cop::gelu(B(), x[0].id()))};
                 }});
  add(Op::gelu_grad, {"from y = gelu(x)",
                      {uniform({2, 4}, 62, -3, 3), uniform({2, 4}, 63)},
                      [](std::span<const Tensor> x) {
                        ir::ValueId y = cop::gelu(B(), x[0].id());
                        return std::vector<Tensor>{T(cop::gelu_grad(B(), x[0].id(), y, x[1].id()))};
                      }});
  // Any other composite: the instances its record gives (ir/composite.h), inputs drawn at random
  // (floats in [-1, 1], integers in the example's range, i1 as 0 / 1).
  uint64_t seed = 100;
  for (Op op : ir::kAllOps) {
    if (!ir::is_composite(op) || m.count(op) || !ir::composite(op).examples) continue;
    for (const ir::CompositeExample& e : ir::composite(op).examples()) {
      std::vector<Array> xs;
      for (size_t k = 0; k < e.operands.size(); ++k) {
        const ir::TensorType& t = e.operands[k];
        Array u = uniform(t.shape, seed++, 0, 1);
        std::vector<double> v = u.to_doubles();
        const auto [lo, hi] = e.range(k);
        for (double& d : v)
          d = is_floating(t.dtype) ? lo + d * (hi - lo)
              : t.dtype == DType::i1
                  ? double(d < 0.5)
                  : std::floor(double(e.int_lo) + d * double(e.int_hi - e.int_lo));
        xs.push_back(Array::from_doubles(DType::f64, t.shape, v));
        if (!is_floating(t.dtype)) xs.back() = Array::from_doubles(t.dtype, t.shape, v);
      }
      m[op].push_back({"record example", xs, [op, e](std::span<const Tensor> x) {
                         std::vector<ir::ValueId> ids;
                         for (const Tensor& t : x) ids.push_back(t.id());
                         return Ts(B().composite(op, ids, e.attrs.params));
                       }});
    }
  }
  return m;
}

// Ops that carry no cotangent, with the reason.
const std::map<Op, const char*> kNotDifferentiable = {
    {Op::parameter, "a leaf: its cotangent is the transform's output"},
    {Op::constant, "no operands"},
    {Op::iota, "integer index values"},
    {Op::and_, "integer / i1 only"},
    {Op::or_, "integer / i1 only"},
    {Op::xor_, "integer / i1 only"},
    {Op::shift_left, "integer only"},
    {Op::shift_right_logical, "integer only"},
    {Op::compare, "i1 result"},
    {Op::select_and_scatter,
     "in its operand: zero (a piecewise-constant pick); in its source: refused by autodiff "
     "(select-and-gather not implemented; first-order pooling gradients do not need it)"},
    {Op::all_gather,
     "refused by autodiff (its transpose is a reduce_scatter, which tlaloc does not have)"},
    {Op::result, "its cotangent goes to its composite's rule"},
};

bool contains(const ir::Function& f, Op op) {
  for (auto& n : f.nodes)
    if (n.op == op) return true;
  return false;
}

}  // namespace

TEST(OpWalk, EveryOpIsCovered) {
  auto table = cases();
  for (Op op : ir::kAllOps) {
    bool nd = kNotDifferentiable.count(op) > 0;
    bool fd = table.count(op) > 0;
    EXPECT_TRUE(nd != fd) << ir::op_name(op)
                          << (nd ? ": listed both ways"
                                 : ": has neither an FD case nor a "
                                   "'not differentiable' entry");
    EXPECT_EQ(autodiff::differentiable(op), fd) << ir::op_name(op);
  }
}

TEST(OpWalk, FiniteDifferencesF64) {
  for (auto& [op, list] : cases()) {
    for (const Case& c : list) {
      SCOPED_TRACE(std::string(ir::op_name(op)) + ": " + c.label);
      std::vector<ir::TensorType> types;
      std::vector<int> wrt;
      for (size_t i = 0; i < c.x.size(); ++i) {
        types.push_back({c.x[i].dtype(), c.x[i].shape()});
        if (is_floating(c.x[i].dtype())) wrt.push_back(int(i));
      }
      ir::Function f = trace::capture(c.fn, types, {}, {}, std::string(ir::op_name(op)));
      ASSERT_TRUE(contains(f, op)) << "the case does not use " << ir::op_name(op);
      expect_vjp_matches_fd(f, c.x, wrt, c.h);
    }
  }
}

// The gradient function is itself differentiable: vjp of vjp(f) (w.r.t. the point and the
// cotangents) against finite differences of vjp(f).
TEST(OpWalk, SecondOrderFiniteDifferencesF64) {
  for (auto& [op, list] : cases()) {
    for (const Case& c : list) {
      if (!c.second_order) continue;
      SCOPED_TRACE(std::string(ir::op_name(op)) + ": " + c.label);
      std::vector<ir::TensorType> types;
      std::vector<int> wrt;
      for (size_t i = 0; i < c.x.size(); ++i) {
        types.push_back({c.x[i].dtype(), c.x[i].shape()});
        if (is_floating(c.x[i].dtype())) wrt.push_back(int(i));
      }
      ir::Function f = trace::capture(c.fn, types, {}, {}, std::string(ir::op_name(op)));
      ir::Function g = autodiff::vjp(f, wrt);
      std::vector<Array> gx = c.x;
      std::vector<int> gwrt = wrt;
      for (int k = 0; k < f.num_outputs(); ++k) {
        gwrt.push_back(int(gx.size()));
        gx.push_back(uniform(f.output_type(k).shape, 50 + uint64_t(k), 0.5, 1.5));
      }
      expect_vjp_matches_fd(g, gx, gwrt, c.h, c.tol2);
    }
  }
}

// What the window rules refuse, by name: second derivatives through select_and_scatter (max
// pooling's gradient) and reduce_window max with base dilations.
TEST(OpWalk, WindowRulesRefuseByName) {
  auto msg = [](const trace::TraceFn& fn, bool twice) -> std::string {
    try {
      ir::Function f = trace::capture(fn, {{DType::f64, {1, 4, 4}}});
      ir::Function g = autodiff::vjp(f, {0});
      if (twice) autodiff::vjp(g, {0, 1});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  auto pool = [](std::span<const Tensor> a) {
    return std::vector<Tensor>{trace::max_pool2d(a[0], {2, 2})};
  };
  EXPECT_EQ(msg(pool, false), "");
  EXPECT_NE(msg(pool, true).find("no VJP of select_and_scatter in its source"), std::string::npos);
  auto dilated = [](std::span<const Tensor> a) {
    return std::vector<Tensor>{
        trace::reduce_window(a[0], ReduceKind::max, {1, 2, 2}, {}, {}, {}, {1, 2, 1})};
  };
  EXPECT_NE(msg(dilated, false).find("no VJP of reduce_window max with base dilations"),
            std::string::npos);
}

// Collectives without a VJP are refused by name; all_reduce sum's VJP is an all_reduce sum.
TEST(OpWalk, CollectiveRulesRefuseByName) {
  auto msg = [](const trace::TraceFn& fn) -> std::string {
    try {
      autodiff::vjp(trace::capture(fn, {{DType::f64, {2, 3}}}), {0});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(msg([](std::span<const Tensor> a) {
              return std::vector<Tensor>{T(B().all_gather(a[0].id(), 0, {{0}}))};
            }).find("no VJP of all_gather"),
            std::string::npos);
  EXPECT_NE(msg([](std::span<const Tensor> a) {
              return std::vector<Tensor>{T(B().all_reduce(a[0].id(), ReduceKind::max, {{0}}))};
            }).find("no VJP of all_reduce max"),
            std::string::npos);
  ir::Function f = trace::capture(
      [](std::span<const Tensor> a) {
        return std::vector<Tensor>{T(B().all_reduce(a[0].id(), ReduceKind::sum, {{0}, {1}}))};
      },
      {{DType::f64, {2, 3}}});
  ir::Function g = autodiff::vjp(f, {0});
  bool of_cotangent = false;  // an all_reduce sum over the same groups reads the cotangent
  for (const ir::Node& n : g.nodes)
    if (n.op == Op::all_reduce && n.operands[0] == g.inputs[1]) {
      of_cotangent = true;
      EXPECT_EQ(n.attrs.reduce_kind, ReduceKind::sum);
      EXPECT_EQ(n.attrs.replica_groups, (std::vector<std::vector<int64_t>>{{0}, {1}}));
    }
  EXPECT_TRUE(of_cotangent) << ir::print(g);
}
