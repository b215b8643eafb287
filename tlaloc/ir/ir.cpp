#include "tlaloc/ir/ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <type_traits>

#include "tlaloc/ir/composite.h"
#include "tlaloc/ir/scalar.h"

namespace tlaloc::ir {

namespace {

constexpr OpRecord kRecords[] = {
#define TLALOC_OP(id, str, kind, operands, facts, formula) \
  {Op::id,                                                 \
   str,                                                    \
   OpKind::kind,                                           \
   operands,                                               \
   facts,                                                  \
   scalar::formula::types,                                 \
   !std::is_same_v<scalar::formula, scalar::None>},
#define TLALOC_COMPOSITE(id, str) \
  {Op::id, str, OpKind::Composite, kVariadic, 0, scalar::None::types, false},
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP
};
static_assert(std::size(kRecords) == kNumOps, "every op of ops.def has one record");

constexpr bool records_in_order() {
  for (size_t i = 0; i < kNumOps; ++i)
    if (size_t(kRecords[i].op) != i) return false;
  return true;
}
static_assert(records_in_order());

}  // namespace

const OpRecord& op_record(Op op) {
  if (size_t(op) >= kNumOps) fail("op #{} is not an op of ops.def", int(op));
  return kRecords[size_t(op)];
}

std::string_view op_name(Op op) { return op_record(op).name; }

OpKind op_kind(Op op) { return op_record(op).kind; }

Op op_from_name(std::string_view s) {
  for (const OpRecord& r : kRecords)
    if (r.name == s) return r.op;
  fail("unknown op '{}'", s);
}

bool is_elementwise(Op op) {
  OpKind k = op_kind(op);
  return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Ternary;
}

bool is_composite(Op op) { return op_kind(op) == OpKind::Composite; }

bool has_fact(Op op, OpFact f) { return (op_record(op).facts & f) != 0; }
bool is_collective(Op op) { return op == Op::all_reduce || op == Op::all_gather; }

std::vector<std::vector<int64_t>> all_replicas(int64_t n) {
  std::vector<int64_t> g(size_t(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < g.size(); ++i) g[i] = int64_t(i);
  return {std::move(g)};
}

bool is_multi_result(const Function& f, ValueId v) {
  const size_t next = size_t(v) + 1;
  return next < f.nodes.size() && f.nodes[next].op == Op::result && f.nodes[next].operands[0] == v;
}

int num_results(const Function& f, ValueId v) {
  if (!is_multi_result(f, v)) return 1;
  int k = 0;
  for (size_t i = size_t(v) + 1;
       i < f.nodes.size() && f.nodes[i].op == Op::result && f.nodes[i].operands[0] == v; ++i)
    ++k;
  return k;
}

std::vector<ValueId> results_of(const Function& f, ValueId v) {
  if (!is_multi_result(f, v)) return {v};
  std::vector<ValueId> out;
  for (int k = 0, n = num_results(f, v); k < n; ++k) out.push_back(v + 1 + k);
  return out;
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
         preferred_element_type == o.preferred_element_type && reduce_kind == o.reduce_kind &&
         comparison_direction == o.comparison_direction && index == o.index && params == o.params &&
         window_dimensions == o.window_dimensions && window_strides == o.window_strides &&
         padding_low == o.padding_low && padding_high == o.padding_high &&
         lhs_dilation == o.lhs_dilation && rhs_dilation == o.rhs_dilation &&
         base_dilations == o.base_dilations && window_dilations == o.window_dilations &&
         conv_dimension_numbers == o.conv_dimension_numbers &&
         feature_group_count == o.feature_group_count && batch_group_count == o.batch_group_count &&
         replica_groups == o.replica_groups && channel_id == o.channel_id;
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
    case Op::reduce_window:
      return fmt::format(" {{{} window={} strides={} low={} high={} base_dil={} win_dil={}}}",
                         name(a.reduce_kind), a.window_dimensions, a.window_strides, a.padding_low,
                         a.padding_high, a.base_dilations, a.window_dilations);
    case Op::select_and_scatter:
      return fmt::format(" {{{} window={} strides={} low={} high={}}}",
                         name(a.comparison_direction), a.window_dimensions, a.window_strides,
                         a.padding_low, a.padding_high);
    case Op::slice:
      return fmt::format(" {{start={} limit={} strides={}}}", a.start_indices, a.limit_indices,
                         a.strides);
    case Op::pad:
      return fmt::format(" {{low={} high={} interior={}}}", a.edge_padding_low, a.edge_padding_high,
                         a.interior_padding);
    case Op::dynamic_slice:
      return fmt::format(" {{slice_sizes={}}}", a.slice_sizes);
    case Op::dot_general:
      return fmt::format(
          " {{batch={}x{} contract={}x{}{}}}", a.lhs_batching_dimensions, a.rhs_batching_dimensions,
          a.lhs_contracting_dimensions, a.rhs_contracting_dimensions,
          a.preferred_element_type ? fmt::format(" preferred={}", name(*a.preferred_element_type))
                                   : "");
    case Op::reverse:
      return fmt::format(" {{dimensions={}}}", a.dimensions);
    case Op::convolution: {
      const ConvDimensionNumbers& d = a.conv_dimension_numbers;
      return fmt::format(
          " {{strides={} pad={}x{} lhs_dil={} rhs_dil={} in=b{}f{}s{} kernel=i{}o{}s{} "
          "out=b{}f{}s{} groups={}/{}}}",
          a.window_strides, a.padding_low, a.padding_high, a.lhs_dilation, a.rhs_dilation,
          d.input_batch_dimension, d.input_feature_dimension, d.input_spatial_dimensions,
          d.kernel_input_feature_dimension, d.kernel_output_feature_dimension,
          d.kernel_spatial_dimensions, d.output_batch_dimension, d.output_feature_dimension,
          d.output_spatial_dimensions, a.feature_group_count, a.batch_group_count);
    }
    case Op::all_reduce:
    case Op::all_gather: {
      std::string s = n.op == Op::all_reduce ? std::string(name(a.reduce_kind))
                                             : fmt::format("dimension={}", a.dimension);
      s += fmt::format(" groups={}", a.replica_groups);
      if (a.channel_id > 0) s += fmt::format(" channel={}", a.channel_id);
      return fmt::format(" {{{}}}", s);
    }
    case Op::result:
      return fmt::format(" #{}", a.index);
    default:
      break;
  }
  if (is_composite(n.op) && !a.params.empty()) {
    const Composite& c = composite(n.op);
    std::vector<std::string> ps;
    for (size_t i = 0; i < a.params.size(); ++i)
      ps.push_back(fmt::format("{}={}", i < c.params.size() ? c.params[i] : "?", a.params[i]));
    return fmt::format(" {{{}}}", fmt::join(ps, " "));
  }
  return "";
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
    std::string type = to_string(n.type);
    if (is_multi_result(f, ValueId(i))) {
      std::vector<std::string> ts;
      for (ValueId r : results_of(f, ValueId(i))) ts.push_back(to_string(f.type(r)));
      type = fmt::format("({})", fmt::join(ts, ", "));
    }
    out += fmt::format("  %{} = {} {}{} : {}\n", i, op_name(n.op), fmt::join(ops, ", "),
                       attrs_text(n), type);
  }
  std::vector<std::string> rs;
  for (ValueId r : f.results) rs.push_back(fmt::format("%{}", r));
  out += fmt::format("  return {}\n}}\n", fmt::join(rs, ", "));
  for (const Alias& a : f.aliases)
    out += fmt::format("// output {} aliases input {}\n", a.output, a.input);
  return out;
}

}  // namespace tlaloc::ir
