#include "tlaloc/ir/builder.h"

#include <algorithm>

namespace tlaloc::ir {

Builder::Builder(std::string name) { f_.name = std::move(name); }
Builder::Builder(Function f) : f_(std::move(f)) {}

ValueId Builder::add(Node n) {
  std::vector<TensorType> ops;
  ops.reserve(n.operands.size());
  for (ValueId o : n.operands) {
    if (o < 0 || size_t(o) >= f_.nodes.size())
      fail("{}: operand %{} is not a value of function {}", op_name(n.op), o, f_.name);
    ops.push_back(f_.nodes[size_t(o)].type);
  }
  if (n.op == Op::result) {
    if (ops.size() != 1) fail("result: expects 1 operand, got {}", ops.size());
    const Node& c = f_.nodes[size_t(n.operands[0])];
    std::vector<TensorType> cops;
    for (ValueId o : c.operands) cops.push_back(f_.nodes[size_t(o)].type);
    const auto ts = result_types(c.op, cops, c.attrs);
    if (!is_composite(c.op) || ts.size() < 2)
      fail("result: %{} ({}) is not a composite with several results", n.operands[0],
           op_name(c.op));
    if (n.attrs.index < 0 || size_t(n.attrs.index) >= ts.size())
      fail("result: index {} of {}, which has {} results", n.attrs.index, op_name(c.op), ts.size());
    if (size_t(n.operands[0]) + 1 + size_t(n.attrs.index) != f_.nodes.size())
      fail("result #{} of %{} must follow it directly, in order", n.attrs.index, n.operands[0]);
    n.type = ts[size_t(n.attrs.index)];
  } else {
    for (ValueId o : n.operands)
      if (is_multi_result(f_, o))
        fail("{}: operand %{} has several results (read its result nodes)", op_name(n.op), o);
    n.type = infer_type(n.op, ops, n.attrs, n.type);
  }
  f_.nodes.push_back(std::move(n));
  return ValueId(f_.nodes.size() - 1);
}

ValueId Builder::parameter(TensorType t, std::string name) {
  Node n{Op::parameter, std::move(t), {}, {}};
  ValueId v = add(std::move(n));
  f_.inputs.push_back(v);
  if (!name.empty() || !f_.input_names.empty()) {
    f_.input_names.resize(f_.inputs.size() - 1);
    f_.input_names.push_back(std::move(name));
  }
  return v;
}

ValueId Builder::constant(Array value) {
  Node n{Op::constant, {}, {}, {}};
  n.attrs.value = std::make_shared<const Array>(std::move(value));
  return add(std::move(n));
}

ValueId Builder::scalar(DType dtype, double value) {
  return constant(Array::filled(dtype, Shape{}, value));
}

ValueId Builder::iota(TensorType t, int64_t dimension) {
  Node n{Op::iota, std::move(t), {}, {}};
  n.attrs.dimension = dimension;
  return add(std::move(n));
}

ValueId Builder::convert(ValueId x, DType to) { return add(Node{Op::convert, {to, {}}, {x}, {}}); }

ValueId Builder::broadcast_in_dim(ValueId x, Shape shape, std::vector<int64_t> dims) {
  Node n{Op::broadcast_in_dim, {DType::f32, std::move(shape)}, {x}, {}};
  n.attrs.broadcast_dimensions = std::move(dims);
  return add(std::move(n));
}

ValueId Builder::reshape(ValueId x, Shape shape) {
  return add(Node{Op::reshape, {DType::f32, std::move(shape)}, {x}, {}});
}

ValueId Builder::transpose(ValueId x, std::vector<int64_t> permutation) {
  Node n{Op::transpose, {}, {x}, {}};
  n.attrs.permutation = std::move(permutation);
  return add(std::move(n));
}

ValueId Builder::slice(ValueId x, std::vector<int64_t> start, std::vector<int64_t> limit,
                       std::vector<int64_t> strides) {
  if (strides.empty()) strides.assign(start.size(), 1);
  Node n{Op::slice, {}, {x}, {}};
  n.attrs.start_indices = std::move(start);
  n.attrs.limit_indices = std::move(limit);
  n.attrs.strides = std::move(strides);
  return add(std::move(n));
}

ValueId Builder::concatenate(std::vector<ValueId> xs, int64_t dimension) {
  Node n{Op::concatenate, {}, std::move(xs), {}};
  n.attrs.dimension = dimension;
  return add(std::move(n));
}

ValueId Builder::pad(ValueId x, ValueId padding_value, std::vector<int64_t> low,
                     std::vector<int64_t> high, std::vector<int64_t> interior) {
  if (interior.empty()) interior.assign(low.size(), 0);
  Node n{Op::pad, {}, {x, padding_value}, {}};
  n.attrs.edge_padding_low = std::move(low);
  n.attrs.edge_padding_high = std::move(high);
  n.attrs.interior_padding = std::move(interior);
  return add(std::move(n));
}

ValueId Builder::dynamic_slice(ValueId x, std::vector<ValueId> start_indices,
                               std::vector<int64_t> slice_sizes) {
  Node n{Op::dynamic_slice, {}, {x}, {}};
  n.operands.insert(n.operands.end(), start_indices.begin(), start_indices.end());
  n.attrs.slice_sizes = std::move(slice_sizes);
  return add(std::move(n));
}

ValueId Builder::dynamic_update_slice(ValueId x, ValueId update,
                                      std::vector<ValueId> start_indices) {
  Node n{Op::dynamic_update_slice, {}, {x, update}, {}};
  n.operands.insert(n.operands.end(), start_indices.begin(), start_indices.end());
  return add(std::move(n));
}

ValueId Builder::gather(ValueId x, ValueId indices) {
  return add(Node{Op::gather, {}, {x, indices}, {}});
}

ValueId Builder::scatter(ValueId x, ValueId indices, ValueId updates) {
  return add(Node{Op::scatter, {}, {x, indices, updates}, {}});
}

std::vector<ValueId> Builder::composite(Op op, std::vector<ValueId> operands,
                                        std::vector<double> params) {
  if (!is_composite(op)) fail("Builder::composite: {} is not a composite op", op_name(op));
  Node n{op, {}, std::move(operands), {}};
  n.attrs.params = std::move(params);
  const ValueId c = add(std::move(n));
  std::vector<TensorType> ops;
  for (ValueId o : f_.nodes[size_t(c)].operands) ops.push_back(f_.nodes[size_t(o)].type);
  const size_t k = result_types(op, ops, f_.nodes[size_t(c)].attrs).size();
  if (k == 1) return {c};
  std::vector<ValueId> out;
  for (size_t i = 0; i < k; ++i) {
    Node r{Op::result, {}, {c}, {}};
    r.attrs.index = int64_t(i);
    out.push_back(add(std::move(r)));
  }
  return out;
}

ValueId Builder::dot_general(ValueId lhs, ValueId rhs, DotDims d, std::optional<DType> preferred) {
  Node n{Op::dot_general, {}, {lhs, rhs}, {}};
  n.attrs.preferred_element_type = preferred;
  n.attrs.lhs_batching_dimensions = std::move(d.lhs_batch);
  n.attrs.rhs_batching_dimensions = std::move(d.rhs_batch);
  n.attrs.lhs_contracting_dimensions = std::move(d.lhs_contract);
  n.attrs.rhs_contracting_dimensions = std::move(d.rhs_contract);
  return add(std::move(n));
}

ValueId Builder::reduce(ValueId x, ReduceKind kind, std::vector<int64_t> dimensions) {
  std::sort(dimensions.begin(), dimensions.end());
  Node n{Op::reduce, {}, {x}, {}};
  n.attrs.reduce_kind = kind;
  n.attrs.dimensions = std::move(dimensions);
  return add(std::move(n));
}

ValueId Builder::all_reduce(ValueId x, ReduceKind kind,
                            std::vector<std::vector<int64_t>> replica_groups) {
  Node n{Op::all_reduce, {}, {x}, {}};
  n.attrs.reduce_kind = kind;
  n.attrs.replica_groups = std::move(replica_groups);
  return add(std::move(n));
}

ValueId Builder::all_gather(ValueId x, int64_t dimension,
                            std::vector<std::vector<int64_t>> replica_groups) {
  Node n{Op::all_gather, {}, {x}, {}};
  n.attrs.dimension = dimension;
  n.attrs.replica_groups = std::move(replica_groups);
  return add(std::move(n));
}

namespace {
// An omitted attribute: `fill` for each of `n` dimensions.
std::vector<int64_t> or_default(std::vector<int64_t> v, size_t n, int64_t fill) {
  if (v.empty()) v.assign(n, fill);
  return v;
}
// The window attributes reduce_window and select_and_scatter share, one entry per dim of x.
void set_window(Attrs& a, size_t rank, std::vector<int64_t> window_dimensions,
                std::vector<int64_t> window_strides, std::vector<int64_t> padding_low,
                std::vector<int64_t> padding_high) {
  a.window_dimensions = std::move(window_dimensions);
  a.window_strides = or_default(std::move(window_strides), rank, 1);
  a.padding_low = or_default(std::move(padding_low), rank, 0);
  a.padding_high = or_default(std::move(padding_high), rank, 0);
}
}  // namespace

ValueId Builder::convolution(ValueId lhs, ValueId rhs, ConvOptions o) {
  if (lhs < 0 || size_t(lhs) >= f_.nodes.size())
    fail("convolution: lhs %{} is not a value of function {}", lhs, f_.name);
  const int64_t rank = f_.type(lhs).shape.rank();
  const size_t ns = size_t(std::max<int64_t>(rank - 2, 0));
  Node n{Op::convolution, {}, {lhs, rhs}, {}};
  Attrs& a = n.attrs;
  a.window_strides = or_default(std::move(o.window_strides), ns, 1);
  for (auto [lo, hi] : o.padding) {
    a.padding_low.push_back(lo);
    a.padding_high.push_back(hi);
  }
  a.padding_low = or_default(std::move(a.padding_low), ns, 0);
  a.padding_high = or_default(std::move(a.padding_high), ns, 0);
  a.lhs_dilation = or_default(std::move(o.lhs_dilation), ns, 1);
  a.rhs_dilation = or_default(std::move(o.rhs_dilation), ns, 1);
  a.conv_dimension_numbers = o.dimension_numbers;
  if (o.dimension_numbers == ConvDimensionNumbers{} && rank != 4) {
    std::vector<int64_t> sp;
    for (int64_t d = 2; d < rank; ++d) sp.push_back(d);
    auto& dn = a.conv_dimension_numbers;
    dn.input_spatial_dimensions = dn.kernel_spatial_dimensions = dn.output_spatial_dimensions = sp;
  }
  a.feature_group_count = o.feature_group_count;
  a.batch_group_count = o.batch_group_count;
  return add(std::move(n));
}

ValueId Builder::reverse(ValueId x, std::vector<int64_t> dimensions) {
  Node n{Op::reverse, {}, {x}, {}};
  n.attrs.dimensions = std::move(dimensions);
  return add(std::move(n));
}

ValueId Builder::reduce_window(ValueId x, ReduceKind kind, std::vector<int64_t> window_dimensions,
                               std::vector<int64_t> window_strides,
                               std::vector<int64_t> padding_low, std::vector<int64_t> padding_high,
                               std::vector<int64_t> base_dilations,
                               std::vector<int64_t> window_dilations) {
  const size_t r = size_t(type(x).shape.rank());
  Node n{Op::reduce_window, {}, {x}, {}};
  n.attrs.reduce_kind = kind;
  set_window(n.attrs, r, std::move(window_dimensions), std::move(window_strides),
             std::move(padding_low), std::move(padding_high));
  n.attrs.base_dilations = or_default(std::move(base_dilations), r, 1);
  n.attrs.window_dilations = or_default(std::move(window_dilations), r, 1);
  return add(std::move(n));
}

ValueId Builder::select_and_scatter(ValueId operand, ValueId source, Comparison select,
                                    std::vector<int64_t> window_dimensions,
                                    std::vector<int64_t> window_strides,
                                    std::vector<int64_t> padding_low,
                                    std::vector<int64_t> padding_high) {
  Node n{Op::select_and_scatter, {}, {operand, source}, {}};
  n.attrs.comparison_direction = select;
  set_window(n.attrs, size_t(type(operand).shape.rank()), std::move(window_dimensions),
             std::move(window_strides), std::move(padding_low), std::move(padding_high));
  return add(std::move(n));
}

ValueId Builder::unary(Op op, ValueId x) {
  if (op_kind(op) != OpKind::Unary || op == Op::convert)
    fail("Builder::unary: {} is not a unary elementwise op", op_name(op));
  return add(Node{op, {}, {x}, {}});
}

ValueId Builder::binary(Op op, ValueId a, ValueId b) {
  if (op_kind(op) != OpKind::Binary || op == Op::compare)
    fail("Builder::binary: {} is not a binary elementwise op", op_name(op));
  return add(Node{op, {}, {a, b}, {}});
}

ValueId Builder::compare(ValueId a, ValueId b, Comparison direction) {
  Node n{Op::compare, {}, {a, b}, {}};
  n.attrs.comparison_direction = direction;
  return add(std::move(n));
}

ValueId Builder::select(ValueId pred, ValueId on_true, ValueId on_false) {
  return add(Node{Op::select, {}, {pred, on_true, on_false}, {}});
}

ValueId Builder::clamp(ValueId min, ValueId x, ValueId max) {
  return add(Node{Op::clamp, {}, {min, x, max}, {}});
}

Function Builder::build(std::vector<ValueId> results, std::vector<std::string> output_names) {
  for (ValueId r : results)
    if (r < 0 || size_t(r) >= f_.nodes.size())
      fail("Builder::build: result %{} is not a value of function {}", r, f_.name);
  if (!output_names.empty() && output_names.size() != results.size())
    fail("Builder::build: {} output names for {} results", output_names.size(), results.size());
  f_.results = std::move(results);
  f_.output_names = std::move(output_names);
  if (!f_.input_names.empty()) f_.input_names.resize(f_.inputs.size());
  return f_;
}

}  // namespace tlaloc::ir
