#include "support/op_cases.h"

#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/composite.h"

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
  // Composites: the instances their records give (ir/composite.h), every result returned.
  for (Op op : kAllOps) {
    if (!is_composite(op) || !composite(op).examples) continue;
    for (const CompositeExample& e : composite(op).examples())
      c[op].push_back(fn(composite(op).name.data(), [&](Builder& b) {
        std::vector<ValueId> ops;
        for (const TensorType& t : e.operands) ops.push_back(b.parameter(t));
        return b.composite(op, ops, e.attrs.params);
      }));
  }
  // Result nodes: every multi-result composite case.
  std::vector<Function> with_results;
  for (const auto& [op, fs] : c)
    for (const Function& f : fs)
      for (const Node& n : f.nodes)
        if (n.op == Op::result) {
          with_results.push_back(f);
          break;
        }
  c[Op::result] = std::move(with_results);
  c[Op::dot_general].push_back(fn("dot", [](Builder& b) {
    auto x = b.parameter({DType::f32, {2, 3, 4}});
    auto y = b.parameter({DType::f32, {2, 4, 5}});
    auto m = b.parameter({DType::f64, {3, 4}});
    return std::vector<ValueId>{b.dot_general(x, y, {{0}, {0}, {2}, {1}}),
                                b.dot_general(m, m, {{}, {}, {1}, {1}})};
  }));
  // bf16 operands, f32 result (preferred_element_type: --precision bf16's dots).
  c[Op::dot_general].push_back(fn("dot_bf16_f32", [](Builder& b) {
    auto x = b.parameter({DType::bf16, {3, 4}});
    auto y = b.parameter({DType::bf16, {4, 5}});
    return std::vector<ValueId>{b.dot_general(x, y, {{}, {}, {1}, {0}}, DType::f32)};
  }));
  for (DType t : kFloats)
    c[Op::convolution].push_back(fn("conv", [&](Builder& b) {
      auto x = b.parameter({t, {2, 4, 6, 5}});
      auto w = b.parameter({t, {6, 2, 3, 2}});
      ConvOptions o;
      o.window_strides = {2, 1};
      o.padding = {{1, 1}, {0, -1}};
      o.rhs_dilation = {1, 2};
      o.feature_group_count = 2;
      return std::vector<ValueId>{b.convolution(x, w, o)};
    }));
  c[Op::convolution].push_back(fn("conv_nhwc", [](Builder& b) {
    auto x = b.parameter({DType::f32, {4, 5, 3}});  // [N, W, C]
    auto w = b.parameter({DType::f32, {2, 3, 6}});  // [W, I, O]
    ConvOptions o;
    o.lhs_dilation = {2};
    o.padding = {{1, 2}};
    o.batch_group_count = 2;
    o.dimension_numbers = {0, 2, {1}, 1, 2, {0}, 0, 2, {1}};
    return std::vector<ValueId>{b.convolution(x, w, o)};
  }));
  c[Op::reverse].push_back(fn("reverse", [](Builder& b) {
    return std::vector<ValueId>{b.reverse(b.parameter({DType::f32, {2, 3, 4}}), {0, 2}),
                                b.reverse(b.parameter({DType::s32, {5}}), {0})};
  }));
  for (auto k : {ReduceKind::sum, ReduceKind::max, ReduceKind::min})
    for (DType t : {DType::f32, DType::bf16, DType::s32, DType::u32})
      c[Op::reduce].push_back(fn("reduce", [&](Builder& b) {
        auto x = b.parameter({t, {3, 4, 2}});
        return std::vector<ValueId>{b.reduce(x, k, {1}), b.reduce(x, k, {0, 2})};
      }));
  for (DType t : kFloats) {
    c[Op::reduce_window].push_back(fn("pool", [&](Builder& b) {
      auto x = b.parameter({t, {2, 3, 5, 6}});
      return std::vector<ValueId>{
          b.reduce_window(x, ReduceKind::max, {1, 1, 2, 2}, {1, 1, 2, 2}),
          b.reduce_window(x, ReduceKind::sum, {1, 1, 3, 3}, {1, 1, 2, 2}, {0, 0, 1, 1},
                          {0, 0, 1, 1}),
          b.reduce_window(x, ReduceKind::min, {2, 1, 2, 3}, {1, 2, 1, 1}, {0, 1, 0, 2},
                          {1, 0, 1, 0}, {1, 1, 2, 1}, {1, 1, 2, 2})};
    }));
    c[Op::select_and_scatter].push_back(fn("pool_grad", [&](Builder& b) {
      auto x = b.parameter({t, {2, 3, 5, 6}});
      auto s = b.parameter({t, {2, 3, 3, 3}});
      auto s2 = b.parameter({t, {1, 3, 4, 5}});
      return std::vector<ValueId>{b.select_and_scatter(x, s, Comparison::GE, {1, 1, 3, 3},
                                                       {1, 1, 2, 2}, {0, 0, 1, 1}, {0, 0, 1, 1}),
                                  b.select_and_scatter(x, s2, Comparison::LE, {2, 1, 2, 3},
                                                       {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 1})};
    }));
  }
  // Collectives over groups of one replica (the identity), so one-process walks run them.
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::s32, DType::u32})
    c[Op::all_reduce].push_back(fn("all_reduce", [&](Builder& b) {
      auto x = b.parameter({t, {2, 3}});
      return std::vector<ValueId>{b.all_reduce(x, ReduceKind::sum, {{0}}),
                                  b.all_reduce(x, ReduceKind::max, all_replicas(1)),
                                  b.all_reduce(x, ReduceKind::min, {{0}})};
    }));
  c[Op::all_reduce].push_back(fn("all_reduce_i1", [&](Builder& b) {
    auto x = b.parameter({DType::i1, {5}});
    return std::vector<ValueId>{b.all_reduce(x, ReduceKind::max, {{0}})};
  }));
  for (DType t : kAllDTypes)
    c[Op::all_gather].push_back(fn("all_gather", [&](Builder& b) {
      auto x = b.parameter({t, {2, 3}});
      return std::vector<ValueId>{b.all_gather(x, 0, {{0}}), b.all_gather(x, 1, all_replicas(1))};
    }));
  return c;
}

}  // namespace tlaloc::testing
