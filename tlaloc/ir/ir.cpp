#include "tlaloc/ir/ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tlaloc::ir {

std::string_view op_name(Op op) {
  switch (op) {
#define TLALOC_OP(id, str, kind) \
  case Op::id:                   \
    return str;
#include "tlaloc/ir/ops.def"
#undef TLALOC_OP
  }
  return "?";
}

OpKind op_kind(Op op) {
  switch (op) {
#define TLALOC_OP(id, str, kind) \
  case Op::id:                   \
    return OpKind::kind;
#include "tlaloc/ir/ops.def"
#undef TLALOC_OP
  }
  return OpKind::Structural;
}

Op op_from_name(std::string_view s) {
  for (Op op : kAllOps)
    if (op_name(op) == s) return op;
  fail("unknown op '{}'", s);
}

bool is_elementwise(Op op) {
  OpKind k = op_kind(op);
  return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Ternary;
}

bool is_composite(Op op) {
  return op == Op::attention || op == Op::attention_grad || op == Op::layer_norm ||
         op == Op::layer_norm_grad || op == Op::cross_entropy || op == Op::cross_entropy_grad ||
         op == Op::gelu || op == Op::gelu_grad;
}

std::string to_string(const TensorType& t) {
  return fmt::format("{}{}", name(t.dtype), to_string(t.shape));
}

std::string_view name(ReduceKind k) {
  switch (k) {
    case ReduceKind::sum:
      return "sum";
    case ReduceKind::max:
      return "max";
    case ReduceKind::min:
      return "min";
  }
  return "?";
}

std::string_view name(Comparison c) {
  switch (c) {
    case Comparison::EQ:
      return "EQ";
    case Comparison::NE:
      return "NE";
    case Comparison::LT:
      return "LT";
    case Comparison::LE:
      return "LE";
    case Comparison::GT:
      return "GT";
    case Comparison::GE:
      return "GE";
  }
  return "?";
}

bool Attrs::operator==(const Attrs& o) const {
  bool same_value = value == o.value || (value && o.value && value->bitwise_equal(*o.value));
  return same_value && broadcast_dimensions == o.broadcast_dimensions &&
         permutation == o.permutation && dimensions == o.dimensions && dimension == o.dimension &&
         start_indices == o.start_indices && limit_indices == o.limit_indices &&
         strides == o.strides && edge_padding_low == o.edge_padding_low &&
         edge_padding_high == o.edge_padding_high && interior_padding == o.interior_padding &&
         slice_sizes == o.slice_sizes && lhs_batching_dimensions == o.lhs_batching_dimensions &&
         rhs_batching_dimensions == o.rhs_batching_dimensions &&
         lhs_contracting_dimensions == o.lhs_contracting_dimensions &&
         rhs_contracting_dimensions == o.rhs_contracting_dimensions &&
         reduce_kind == o.reduce_kind && comparison_direction == o.comparison_direction &&
         scale == o.scale && causal == o.causal && epsilon == o.epsilon;
}

namespace {

std::string attrs_text(const Node& n) {
  const Attrs& a = n.attrs;
  switch (n.op) {
    case Op::constant: {
      const Array& v = *a.value;
      if (v.numel() <= 8) return fmt::format(" {{value={}}}", v.to_doubles());
      return fmt::format(" {{value=<{} elements>}}", v.numel());
    }
    case Op::iota:
      return fmt::format(" {{iota_dimension={}}}", a.dimension);
    case Op::concatenate:
      return fmt::format(" {{dimension={}}}", a.dimension);
    case Op::broadcast_in_dim:
      return fmt::format(" {{dims={}}}", a.broadcast_dimensions);
    case Op::transpose:
      return fmt::format(" {{permutation={}}}", a.permutation);
    case Op::reduce:
      return fmt::format(" {{{} over {}}}", name(a.reduce_kind), a.dimensions);
    case Op::compare:
      return fmt::format(" {{{}}}", name(a.comparison_direction));
    case Op::slice:
      return fmt::format(" {{start={} limit={} strides={}}}", a.start_indices, a.limit_indices,
                         a.strides);
    case Op::pad:
      return fmt::format(" {{low={} high={} interior={}}}", a.edge_padding_low, a.edge_padding_high,
                         a.interior_padding);
    case Op::dynamic_slice:
      return fmt::format(" {{slice_sizes={}}}", a.slice_sizes);
    case Op::dot_general:
      return fmt::format(" {{batch={}x{} contract={}x{}}}", a.lhs_batching_dimensions,
                         a.rhs_batching_dimensions, a.lhs_contracting_dimensions,
                         a.rhs_contracting_dimensions);
    case Op::attention:
    case Op::attention_grad:
      return fmt::format(" {{scale={} causal={}}}", a.scale, a.causal);
    case Op::layer_norm:
    case Op::layer_norm_grad:
      return fmt::format(" {{epsilon={}}}", a.epsilon);
    default:
      return "";
  }
}

}  // namespace

std::string print(const Function& f) {
  std::string out = fmt::format("func @{}(", f.name);
  for (int i = 0; i < f.num_inputs(); ++i) {
    if (i) out += ", ";
    out += fmt::format("%{}: {}", f.inputs[size_t(i)], to_string(f.input_type(i)));
    if (size_t(i) < f.input_names.size() && !f.input_names[size_t(i)].empty())
      out += fmt::format(" \"{}\"", f.input_names[size_t(i)]);
  }
  out += ") {\n";
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const Node& n = f.nodes[i];
    if (n.op == Op::parameter) continue;
    std::vector<std::string> ops;
    for (ValueId o : n.operands) ops.push_back(fmt::format("%{}", o));
    out += fmt::format("  %{} = {} {}{} : {}\n", i, op_name(n.op), fmt::join(ops, ", "),
                       attrs_text(n), to_string(n.type));
  }
  std::vector<std::string> rs;
  for (ValueId r : f.results) rs.push_back(fmt::format("%{}", r));
  out += fmt::format("  return {}\n}}\n", fmt::join(rs, ", "));
  for (const Alias& a : f.aliases)
    out += fmt::format("// output {} aliases input {}\n", a.output, a.input);
  return out;
}

}  // namespace tlaloc::ir
