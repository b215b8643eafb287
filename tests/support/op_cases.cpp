#include "support/op_cases.h"

#include "tlaloc/ir/builder.h"

namespace tlaloc::testing {

using namespace tlaloc::ir;

namespace {

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::bf16, DType::f16};

template <typename F>
Function fn(const char* name, F body) {
  Builder b(name);
  return b.build(body(b));
}

}  // namespace

std::map<Op, std::vector<Function>> op_cases() {
  std::map<Op, std::vector<Function>> c;
  for (Op op : kAllOps) {
    if (op_kind(op) == OpKind::Unary && op != Op::convert) {
      for (DType t : kFloats)
        c[op].push_back(fn("unary", [&](Builder& b) {
          return std::vector<ValueId>{b.unary(op, b.parameter({t, {2, 3}}))};
        }));
      if (op == Op::negate || op == Op::abs || op == Op::sign)
        c[op].push_back(fn("unary_int", [&](Builder& b) {
          return std::vector<ValueId>{b.unary(op, b.parameter({DType::s32, {5}}))};
        }));
    }
    if (op_kind(op) == OpKind::Binary && op != Op::compare) {
      std::vector<DType> ts;
      bool logic = op == Op::and_ || op == Op::or_ || op == Op::xor_;
      bool shift = op == Op::shift_left || op == Op::shift_right_logical;
      if (logic)
        ts = {DType::s32, DType::u32, DType::i1};
      else if (shift)
        ts = {DType::s32, DType::u32};
      else if (op == Op::power)
        ts = {DType::f32, DType::f64, DType::bf16, DType::f16};
      else
        ts = {DType::f32, DType::f64, DType::bf16, DType::f16, DType::s32, DType::u32};
      for (DType t : ts)
        c[op].push_back(fn("binary", [&](Builder& b) {
          auto x = b.parameter({t, {4}});
          return std::vector<ValueId>{b.binary(op, x, b.parameter({t, {4}}))};
        }));
    }
  }
  for (DType t : kAllDTypes)
    for (auto d : {Comparison::EQ, Comparison::NE, Comparison::LT, Comparison::LE, Comparison::GT,
                   Comparison::GE})
      c[Op::compare].push_back(fn("compare", [&](Builder& b) {
        auto x = b.parameter({t, {6}});
        return std::vector<ValueId>{b.compare(x, b.parameter({t, {6}}), d)};
      }));
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes)
      c[Op::convert].push_back(fn("convert", [&](Builder& b) {
        return std::vector<ValueId>{b.convert(b.parameter({from, {5}}), to)};
      }));
  for (DType t : kAllDTypes) {
    c[Op::constant].push_back(fn("constant", [&](Builder& b) {
      return std::vector<ValueId>{
          b.constant(Array::from_doubles(t, {2, 3}, {0, 1, -1, 0.5, 3e3, -7.25}))};
    }));
    c[Op::select].push_back(fn("select", [&](Builder& b) {
      auto p = b.parameter({DType::i1, {3}});
      auto x = b.parameter({t, {3}});
      return std::vector<ValueId>{b.select(p, x, b.parameter({t, {3}}))};
    }));
  }
  c[Op::constant].push_back(fn("big_constant", [](Builder& b) {
    std::vector<float> v(5000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.37f - 11.0f;
    return std::vector<ValueId>{b.constant(Array::from<float>({50, 100}, v))};
  }));
  for (DType t : {DType::f32, DType::s32, DType::u32, DType::bf16})
    c[Op::iota].push_back(fn("iota", [&](Builder& b) {
      return std::vector<ValueId>{b.iota({t, {3, 4}}, 1), b.iota({t, {5}}, 0)};
    }));
  c[Op::clamp].push_back(fn("clamp", [](Builder& b) {
    auto lo = b.parameter({DType::f32, {}});
    auto x = b.parameter({DType::f32, {4}});
    return std::vector<ValueId>{b.clamp(lo, x, b.parameter({DType::f32, {}}))};
  }));
  c[Op::clamp].push_back(fn("clamp_s32", [](Builder& b) {
    auto lo = b.parameter({DType::s32, {4}});
    auto x = b.parameter({DType::s32, {4}});
    return std::vector<ValueId>{b.clamp(lo, x, b.parameter({DType::s32, {4}}))};
  }));
  c[Op::broadcast_in_dim].push_back(fn("bcast", [](Builder& b) {
    auto x = b.parameter({DType::f32, {3, 1}});
    return std::vector<ValueId>{b.broadcast_in_dim(x, {2, 3, 4}, {1, 2}),
                                b.broadcast_in_dim(b.parameter({DType::s32, {}}), {2}, {})};
  }));
  c[Op::reshape].push_back(fn("reshape", [](Builder& b) {
    return std::vector<ValueId>{b.reshape(b.parameter({DType::f16, {2, 3}}), {3, 1, 2})};
  }));
  c[Op::transpose].push_back(fn("transpose", [](Builder& b) {
    return std::vector<ValueId>{b.transpose(b.parameter({DType::f32, {2, 3, 4}}), {2, 0, 1})};
  }));
  c[Op::slice].push_back(fn("slice", [](Builder& b) {
    return std::vector<ValueId>{b.slice(b.parameter({DType::f32, {5, 6}}), {1, 0}, {5, 6}, {2, 3})};
  }));
  c[Op::concatenate].push_back(fn("concat", [](Builder& b) {
    auto x = b.parameter({DType::u32, {2, 3}});
    auto y = b.parameter({DType::u32, {1, 3}});
    return std::vector<ValueId>{b.concatenate({x, y, x}, 0)};
  }));
  c[Op::pad].push_back(fn("pad", [](Builder& b) {
    auto x = b.parameter({DType::f32, {2, 3}});
    return std::vector<ValueId>{b.pad(x, b.parameter({DType::f32, {}}), {0, 1}, {2, 0}, {1, 1})};
  }));
  c[Op::dynamic_slice].push_back(fn("dslice", [](Builder& b) {
    auto x = b.parameter({DType::f32, {6, 5}});
    auto i = b.parameter({DType::s32, {}});
    auto j = b.parameter({DType::s32, {}});
    return std::vector<ValueId>{b.dynamic_slice(x, {i, j}, {2, 3})};
  }));
  c[Op::dynamic_update_slice].push_back(fn("dus", [](Builder& b) {
    auto x = b.parameter({DType::f32, {6, 5}});
    auto u = b.parameter({DType::f32, {2, 3}});
    auto i = b.parameter({DType::s32, {}});
    auto j = b.parameter({DType::s32, {}});
    return std::vector<ValueId>{b.dynamic_update_slice(x, u, {i, j})};
  }));
  // Rows 0..7 of a 6-row table: the last ones are out of range (clamped / skipped).
  c[Op::gather].push_back(fn("gather", [](Builder& b) {
    auto x = b.parameter({DType::f32, {6, 4}});
    auto i = b.parameter({DType::s32, {2, 3}});
    return std::vector<ValueId>{b.gather(x, i), b.gather(b.parameter({DType::u32, {6}}), i)};
  }));
  c[Op::scatter].push_back(fn("scatter", [](Builder& b) {
    auto x = b.parameter({DType::f32, {6, 4}});
    auto i = b.parameter({DType::s32, {5}});
    auto u = b.parameter({DType::f32, {5, 4}});
    auto y = b.parameter({DType::s32, {6}});
    auto v = b.parameter({DType::s32, {5}});
    return std::vector<ValueId>{b.scatter(x, i, u), b.scatter(y, i, v)};
  }));
  for (bool causal : {false, true}) {
    c[Op::attention].push_back(fn("attention", [&](Builder& b) {
      auto q = b.parameter({DType::f32, {2, 4, 3, 5}});
      auto k = b.parameter({DType::f32, {2, 2, 6, 5}});
      auto v = b.parameter({DType::f32, {2, 2, 6, 7}});
      auto m = b.parameter({DType::i1, {2, 6}});
      return std::vector<ValueId>{b.attention(q, k, v, m, 0.5, causal)};
    }));
    c[Op::attention_grad].push_back(fn("attention_grad", [&](Builder& b) {
      auto q = b.parameter({DType::f64, {1, 2, 3, 4}});
      auto k = b.parameter({DType::f64, {1, 1, 3, 4}});
      auto v = b.parameter({DType::f64, {1, 1, 3, 2}});
      auto o = b.parameter({DType::f64, {1, 2, 3, 3}});
      auto d = b.parameter({DType::f64, {1, 2, 3, 3}});
      return std::vector<ValueId>{b.attention_grad(q, k, v, o, d, -1, 0.25, causal)};
    }));
  }
  c[Op::layer_norm].push_back(fn("layer_norm", [](Builder& b) {
    auto x = b.parameter({DType::f32, {2, 3, 5}});
    auto w = b.parameter({DType::f32, {5}});
    auto bias = b.parameter({DType::f32, {5}});
    auto y = b.parameter({DType::f64, {4, 9}});
    auto v = b.parameter({DType::f64, {9}});
    return std::vector<ValueId>{b.layer_norm(x, w, bias, 1e-5), b.layer_norm(y, v, -1, 0.25)};
  }));
  c[Op::layer_norm_grad].push_back(fn("layer_norm_grad", [](Builder& b) {
    auto x = b.parameter({DType::f64, {3, 6}});
    auto w = b.parameter({DType::f64, {6}});
    auto d = b.parameter({DType::f64, {3, 6}});
    auto y = b.parameter({DType::f32, {7}});
    auto v = b.parameter({DType::f32, {7}});
    auto e = b.parameter({DType::f32, {7}});
    return std::vector<ValueId>{b.layer_norm_grad(x, w, d, 1e-3), b.layer_norm_grad(y, v, e, 1e-5)};
  }));
  c[Op::cross_entropy].push_back(fn("cross_entropy", [](Builder& b) {
    auto x = b.parameter({DType::f32, {4, 7}});
    auto l = b.parameter({DType::s32, {4}});
    auto y = b.parameter({DType::f64, {3, 2}});
    auto m = b.parameter({DType::s32, {3}});
    return std::vector<ValueId>{b.cross_entropy(x, l), b.cross_entropy(y, m)};
  }));
  c[Op::cross_entropy_grad].push_back(fn("cross_entropy_grad", [](Builder& b) {
    auto x = b.parameter({DType::f64, {4, 7}});
    auto l = b.parameter({DType::s32, {4}});
    auto d = b.parameter({DType::f64, {4}});
    return std::vector<ValueId>{b.cross_entropy_grad(x, l, d)};
  }));
  c[Op::gelu].push_back(fn("gelu", [](Builder& b) {
    auto x = b.parameter({DType::f32, {3, 5}});
    auto y = b.parameter({DType::f64, {7}});
    return std::vector<ValueId>{b.gelu(x), b.gelu(y)};
  }));
  c[Op::gelu_grad].push_back(fn("gelu_grad", [](Builder& b) {
    auto x = b.parameter({DType::f32, {2, 6}});
    auto d = b.parameter({DType::f32, {2, 6}});
    return std::vector<ValueId>{b.gelu_grad(x, b.gelu(x), d)};
  }));
  c[Op::dot_general].push_back(fn("dot", [](Builder& b) {
    auto x = b.parameter({DType::f32, {2, 3, 4}});
    auto y = b.parameter({DType::f32, {2, 4, 5}});
    auto m = b.parameter({DType::f64, {3, 4}});
    return std::vector<ValueId>{b.dot_general(x, y, {{0}, {0}, {2}, {1}}),
                                b.dot_general(m, m, {{}, {}, {1}, {1}})};
  }));
  for (auto k : {ReduceKind::sum, ReduceKind::max, ReduceKind::min})
    for (DType t : {DType::f32, DType::bf16, DType::s32, DType::u32})
      c[Op::reduce].push_back(fn("reduce", [&](Builder& b) {
        auto x = b.parameter({t, {3, 4, 2}});
        return std::vector<ValueId>{b.reduce(x, k, {1}), b.reduce(x, k, {0, 2})};
      }));
  return c;
}

}  // namespace tlaloc::testing
