#include "tlaloc/stablehlo/emit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/stablehlo/parse_ast.h"

namespace tlaloc::stablehlo {

namespace detail {

// The identity of a reduction (the init value of tlaloc's reduce, see ir/builder.h).
Array reduce_identity(ir::ReduceKind k, DType t) {
  double inf = std::numeric_limits<double>::infinity();
  switch (k) {
    case ir::ReduceKind::sum:
      return Array::filled(t, Shape{}, 0.0);
    case ir::ReduceKind::max:
      if (t == DType::s32) return Array::scalar(std::numeric_limits<int32_t>::min());
      if (t == DType::u32) return Array::scalar(uint32_t(0));
      return Array::filled(t, Shape{}, -inf);
    case ir::ReduceKind::min:
      if (t == DType::s32) return Array::scalar(std::numeric_limits<int32_t>::max());
      if (t == DType::u32) return Array::scalar(std::numeric_limits<uint32_t>::max());
      return Array::filled(t, Shape{}, inf);
  }
  fail("reduce: unknown reduce kind");
}

std::string_view reduce_region_op(ir::ReduceKind k) {
  switch (k) {
    case ir::ReduceKind::sum:
      return "add";
    case ir::ReduceKind::max:
      return "maximum";
    case ir::ReduceKind::min:
      return "minimum";
  }
  return "?";
}

std::string_view comparison_type(DType t) {
  if (is_floating(t)) return "FLOAT";
  if (t == DType::s32) return "SIGNED";
  return "UNSIGNED";  // u32 and i1
}

}  // namespace detail

using detail::comparison_type;
using detail::reduce_identity;
using detail::reduce_region_op;
using ir::Function;
using ir::Node;
using ir::Op;
using ir::TensorType;

std::string_view name(Precision p) {
  switch (p) {
    case Precision::DEFAULT:
      return "DEFAULT";
    case Precision::HIGH:
      return "HIGH";
    case Precision::HIGHEST:
      return "HIGHEST";
  }
  return "?";
}

Precision parse_precision(std::string_view s, std::string_view flag) {
  if (s == "default") return Precision::DEFAULT;
  if (s == "high") return Precision::HIGH;
  if (s == "highest") return Precision::HIGHEST;
  fail("{} '{}': use default, high or highest", flag, s);
}

std::string_view element_type(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::s32:
      return "i32";
    case DType::u32:
      return "ui32";
    case DType::i1:
      return "i1";
  }
  return "?";
}

std::string type_text(const TensorType& t) {
  std::string s = "tensor<";
  for (int64_t d : t.shape.dims) s += fmt::format("{}x", d);
  s += element_type(t.dtype);
  return s + ">";
}

namespace {

// One element of `a` as an MLIR literal.
std::string element(const Array& a, int64_t i) {
  const auto* p = static_cast<const unsigned char*>(a.raw());
  switch (a.dtype()) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      if (std::isfinite(v)) return fmt::format("{:.8e}", v);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      return fmt::format("0x{:08X}", bits);
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      if (std::isfinite(v)) return fmt::format("{:.16e}", v);
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      return fmt::format("0x{:016X}", bits);
    }
    case DType::bf16:
    case DType::f16: {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * i, 2);
      float v = a.dtype() == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      if (std::isfinite(v)) return fmt::format("{:.8e}", v);
      return fmt::format("0x{:04X}", bits);
    }
    case DType::s32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return fmt::format("{}", v);
    }
    case DType::u32: {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return fmt::format("{}", v);
    }
    case DType::i1:
      return p[i] ? "true" : "false";
  }
  return "?";
}

// Nested [..] list of the elements of dims [d, rank) starting at flat index *i.
void nested(const Array& a, size_t d, int64_t* i, std::string* out) {
  const auto& dims = a.shape().dims;
  if (d == dims.size()) {
    *out += element(a, (*i)++);
    return;
  }
  *out += '[';
  for (int64_t k = 0; k < dims[d]; ++k) {
    if (k) *out += ", ";
    nested(a, d + 1, i, out);
  }
  *out += ']';
}

bool is_splat(const Array& a) {
  size_t w = size_of(a.dtype());
  const auto* p = static_cast<const unsigned char*>(a.raw());
  for (int64_t i = 1; i < a.numel(); ++i)
    if (std::memcmp(p, p + size_t(i) * w, w) != 0) return false;
  return true;
}

std::string dims_list(const std::vector<int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

std::string i64_array(const std::vector<int64_t>& v) {
  if (v.empty()) return "array<i64>";
  return fmt::format("array<i64: {}>", fmt::join(v, ", "));
}

// StableHLO's window padding: a [rank, 2] i64 tensor of (low, high) pairs.
std::string padding_attr(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  std::vector<std::string> rows;
  for (size_t i = 0; i < lo.size(); ++i) rows.push_back(fmt::format("[{}, {}]", lo[i], hi[i]));
  return fmt::format("padding = dense<{}> : tensor<{}x2xi64>",
                     rows.empty() ? "" : fmt::format("[{}]", fmt::join(rows, ", ")), lo.size());
}

// A collective's replica_groups: a [groups, size] i64 tensor.
std::string replica_groups_attr(const std::vector<std::vector<int64_t>>& groups) {
  std::vector<std::string> rows;
  for (const auto& g : groups) rows.push_back(dims_list(g));
  return fmt::format("replica_groups = dense<[{}]> : tensor<{}x{}xi64>", fmt::join(rows, ", "),
                     groups.size(), groups.empty() ? 0 : groups[0].size());
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", char(c));
    else if (c < 0x20 || c >= 0x7F)
      out += fmt::format("\\{:02X}", c);
    else
      out += char(c);
  }
  return out + "\"";
}

bool bare_symbol(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'))
      return false;
  return true;
}

// "[b, f, 0, 1]": which axis of a rank-n tensor is the batch / feature (or kernel input / output
// feature) axis and which the i-th spatial one.
std::string conv_layout(int64_t rank, int64_t first, char first_c, int64_t second, char second_c,
                        const std::vector<int64_t>& spatial) {
  std::vector<std::string> v(size_t(rank), "?");
  v[size_t(first)] = std::string(1, first_c);
  v[size_t(second)] = std::string(1, second_c);
  for (size_t i = 0; i < spatial.size(); ++i) v[size_t(spatial[i])] = fmt::format("{}", i);
  return fmt::format("[{}]", fmt::join(v, ", "));
}

// convolution's properties in MLIR's order (sorted by name); window_reversal is left out (all
// false).
std::string conv_properties(const ir::Attrs& a, int64_t rank, std::string_view precision) {
  const ir::ConvDimensionNumbers& d = a.conv_dimension_numbers;
  std::string dn =
      fmt::format("#stablehlo.conv<{}x{}->{}>",
                  conv_layout(rank, d.input_batch_dimension, 'b', d.input_feature_dimension, 'f',
                              d.input_spatial_dimensions),
                  conv_layout(rank, d.kernel_output_feature_dimension, 'o',
                              d.kernel_input_feature_dimension, 'i', d.kernel_spatial_dimensions),
                  conv_layout(rank, d.output_batch_dimension, 'b', d.output_feature_dimension, 'f',
                              d.output_spatial_dimensions));
  std::vector<int64_t> pads;
  for (size_t i = 0; i < a.padding_low.size(); ++i) {
    pads.push_back(a.padding_low[i]);
    pads.push_back(a.padding_high[i]);
  }
  std::string padding;
  if (pads.empty()) {
    padding = "dense<>";
  } else if (std::all_of(pads.begin(), pads.end(), [&](int64_t p) { return p == pads[0]; })) {
    padding = fmt::format("dense<{}>", pads[0]);
  } else {
    std::vector<std::string> rows;
    for (size_t i = 0; i < a.padding_low.size(); ++i)
      rows.push_back(fmt::format("[{}, {}]", a.padding_low[i], a.padding_high[i]));
    padding = fmt::format("dense<[{}]>", fmt::join(rows, ", "));
  }
  return fmt::format(
      "batch_group_count = {} : i64, dimension_numbers = {}, feature_group_count = {} : i64, "
      "lhs_dilation = {}, padding = {} : tensor<{}x2xi64>, precision_config = "
      "[#stablehlo<precision {}>, #stablehlo<precision {}>], rhs_dilation = {}, window_strides = "
      "{}",
      a.batch_group_count, dn, a.feature_group_count, i64_array(a.lhs_dilation), padding,
      a.padding_low.size(), precision, precision, i64_array(a.rhs_dilation),
      i64_array(a.window_strides));
}

// One op printer. Values are named %<n> in emission order; inputs %arg<i>.
class Printer {
 public:
  Printer(const Function& f, const EmitOptions& o) : f_(f), o_(o), names_(f.nodes.size()) {
    for (int i = 0; i < f.num_inputs(); ++i)
      names_[size_t(f.inputs[size_t(i)])] = fmt::format("%arg{}", i);
  }

  std::string run() {
    std::string out = fmt::format(
        "module @{} attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = {} : i32}} "
        "{{\n",
        bare_symbol(f_.name) ? f_.name : quoted(f_.name), num_replicas(f_));
    out += "  func.func public @main(" + arguments() + ") -> (" + results() + ") {\n";
    for (size_t v = 0; v < f_.nodes.size(); ++v)
      if (f_.nodes[v].op != Op::parameter) node(ir::ValueId(v), &out);
    std::vector<std::string> rs, ts;
    for (ir::ValueId r : f_.results) {
      rs.push_back(names_[size_t(r)]);
      ts.push_back(type_text(f_.type(r)));
    }
    out += fmt::format("    \"func.return\"({}) : ({}) -> ()\n", fmt::join(rs, ", "),
                       fmt::join(ts, ", "));
    return out + "  }\n}\n";
  }

 private:
  std::string arguments() const {
    std::vector<std::string> args;
    for (int i = 0; i < f_.num_inputs(); ++i) {
      std::vector<std::string> attrs;
      for (const ir::Alias& a : f_.aliases)
        if (a.input == i) attrs.push_back(fmt::format("tf.aliasing_output = {} : i32", a.output));
      if (o_.names && size_t(i) < f_.input_names.size() && !f_.input_names[size_t(i)].empty())
        attrs.push_back("tlaloc.name = " + quoted(f_.input_names[size_t(i)]));
      std::string s = fmt::format("%arg{}: {}", i, type_text(f_.input_type(i)));
      if (!attrs.empty()) s += fmt::format(" {{{}}}", fmt::join(attrs, ", "));
      args.push_back(std::move(s));
    }
    return fmt::format("{}", fmt::join(args, ", "));
  }

  std::string results() const {
    std::vector<std::string> rs;
    for (int i = 0; i < f_.num_outputs(); ++i) {
      std::string s = type_text(f_.output_type(i));
      if (o_.names && size_t(i) < f_.output_names.size() && !f_.output_names[size_t(i)].empty())
        s += " {tlaloc.name = " + quoted(f_.output_names[size_t(i)]) + "}";
      rs.push_back(std::move(s));
    }
    return fmt::format("{}", fmt::join(rs, ", "));
  }

  // "(%a, %b)" and "(tensor<..>, tensor<..>)" of a node's operands.
  std::string operand_list(const Node& n) const {
    std::vector<std::string> v;
    for (ir::ValueId o : n.operands) v.push_back(names_[size_t(o)]);
    return fmt::format("({})", fmt::join(v, ", "));
  }
  std::string operand_types(const Node& n) const {
    std::vector<std::string> v;
    for (ir::ValueId o : n.operands) v.push_back(type_text(f_.type(o)));
    return fmt::format("({})", fmt::join(v, ", "));
  }

  // A scalar binary region: ^bb0(%lhsN, %rhsN) -> stablehlo.<op>.
  static std::string region(std::string_view op, const std::string& id, DType t) {
    std::string st = type_text({t, {}});
    return fmt::format(
        " ({{\n    ^bb0(%lhs{0}: {1}, %rhs{0}: {1}):\n"
        "      %red{0} = \"stablehlo.{2}\"(%lhs{0}, %rhs{0}) : ({1}, {1}) -> {1}\n"
        "      \"stablehlo.return\"(%red{0}) : ({1}) -> ()\n    }})",
        id, st, op);
  }

  std::string properties(const Node& n) const {
    const ir::Attrs& a = n.attrs;
    switch (n.op) {
      case Op::constant:
        return fmt::format("value = {} : {}", dense_literal(*a.value), type_text(n.type));
      case Op::iota:
        return fmt::format("iota_dimension = {} : i64", a.dimension);
      case Op::broadcast_in_dim:
        return "broadcast_dimensions = " + i64_array(a.broadcast_dimensions);
      case Op::transpose:
        return "permutation = " + i64_array(a.permutation);
      case Op::slice:
        return fmt::format("start_indices = {}, limit_indices = {}, strides = {}",
                           i64_array(a.start_indices), i64_array(a.limit_indices),
                           i64_array(a.strides));
      case Op::concatenate:
        return fmt::format("dimension = {} : i64", a.dimension);
      case Op::pad:
        return fmt::format("edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
                           i64_array(a.edge_padding_low), i64_array(a.edge_padding_high),
                           i64_array(a.interior_padding));
      case Op::dynamic_slice:
        return "slice_sizes = " + i64_array(a.slice_sizes);
      case Op::gather: {
        const Shape& x = f_.type(n.operands[0]).shape;
        int64_t m = f_.type(n.operands[1]).shape.rank();
        std::vector<int64_t> offset, sizes{1};
        for (int64_t i = 1; i < x.rank(); ++i) {
          offset.push_back(m + i - 1);
          sizes.push_back(x[i]);
        }
        std::string off = offset.empty() ? "" : "offset_dims = " + dims_list(offset) + ", ";
        return fmt::format(
            "dimension_numbers = #stablehlo.gather<{}collapsed_slice_dims = [0], "
            "start_index_map = [0], index_vector_dim = {}>, indices_are_sorted = false, "
            "slice_sizes = {}",
            off, m, i64_array(sizes));
      }
      case Op::scatter: {
        int64_t r = f_.type(n.operands[0]).shape.rank();
        int64_t m = f_.type(n.operands[1]).shape.rank();
        std::vector<int64_t> window;
        for (int64_t i = 1; i < r; ++i) window.push_back(m + i - 1);
        std::string win = window.empty() ? "" : "update_window_dims = " + dims_list(window) + ", ";
        return fmt::format(
            "indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<{}"
            "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
            "index_vector_dim = {}>, unique_indices = false",
            win, m);
      }
      case Op::dot_general: {
        std::vector<std::string> dn;
        auto field = [&](const char* nm, const std::vector<int64_t>& v) {
          if (!v.empty()) dn.push_back(fmt::format("{} = {}", nm, dims_list(v)));
        };
        field("lhs_batching_dimensions", a.lhs_batching_dimensions);
        field("rhs_batching_dimensions", a.rhs_batching_dimensions);
        field("lhs_contracting_dimensions", a.lhs_contracting_dimensions);
        field("rhs_contracting_dimensions", a.rhs_contracting_dimensions);
        return fmt::format(
            "dot_dimension_numbers = #stablehlo.dot<{}>, precision_config = "
            "[#stablehlo<precision {}>, #stablehlo<precision {}>]",
            fmt::join(dn, ", "), name(o_.precision), name(o_.precision));
      }
      case Op::reduce:
      case Op::reverse:
        return "dimensions = " + i64_array(a.dimensions);
      case Op::convolution:
        return conv_properties(a, f_.type(n.operands[0]).shape.rank(), name(o_.precision));
      case Op::reduce_window:
        return fmt::format(
            "base_dilations = {}, {}, window_dilations = {}, window_dimensions = {}, "
            "window_strides = {}",
            i64_array(a.base_dilations), padding_attr(a.padding_low, a.padding_high),
            i64_array(a.window_dilations), i64_array(a.window_dimensions),
            i64_array(a.window_strides));
      case Op::select_and_scatter:
        return fmt::format("{}, window_dimensions = {}, window_strides = {}",
                           padding_attr(a.padding_low, a.padding_high),
                           i64_array(a.window_dimensions), i64_array(a.window_strides));
      case Op::all_reduce:
      case Op::all_gather: {
        // Sorted by name, as MLIR prints properties.
        std::string p = n.op == Op::all_gather
                            ? fmt::format("all_gather_dim = {} : i64, ", a.dimension)
                            : std::string();
        if (a.channel_id > 0)
          p += fmt::format("channel_handle = #stablehlo.channel_handle<handle = {}, type = 1>, ",
                           a.channel_id);
        p += replica_groups_attr(a.replica_groups);
        if (a.channel_id > 0) p += ", use_global_device_ids";
        return p;
      }
      case Op::compare:
        return fmt::format(
            "compare_type = #stablehlo<comparison_type {}>, "
            "comparison_direction = #stablehlo<comparison_direction {}>",
            comparison_type(f_.type(n.operands[0]).dtype), ir::name(a.comparison_direction));
      default:
        return "";
    }
  }

  void node(ir::ValueId v, std::string* out) {
    const Node& n = f_.nodes[size_t(v)];
    std::string id = fmt::format("{}", counter_++);
    names_[size_t(v)] = "%" + id;
    std::string ops = operand_list(n), types = operand_types(n);
    std::string rgn;
    if (n.op == Op::reduce || n.op == Op::reduce_window || n.op == Op::select_and_scatter) {
      // The init value is a constant printed just before the op (select_and_scatter: 0).
      DType t = n.type.dtype;
      const bool sas = n.op == Op::select_and_scatter;
      const auto kind = sas ? ir::ReduceKind::sum : n.attrs.reduce_kind;
      std::string init = "%init" + id, st = type_text({t, {}});
      *out += fmt::format("    {} = \"stablehlo.constant\"() <{{value = {} : {}}}> : () -> {}\n",
                          init, dense_literal(reduce_identity(kind, t)), st, st);
      ops = fmt::format("({}, {}{})", names_[size_t(n.operands[0])],
                        sas ? names_[size_t(n.operands[1])] + ", " : "", init);
      types = fmt::format("({}, {}{})", type_text(f_.type(n.operands[0])),
                          sas ? type_text(f_.type(n.operands[1])) + ", " : "", st);
      rgn = region(reduce_region_op(kind), id, t);
      if (sas) {
        // Two regions: the select (a compare) and the scatter (an add).
        const std::string sel = fmt::format(
            "\"stablehlo.compare\"(%lhs{0}s, %rhs{0}s) <{{compare_type = "
            "#stablehlo<comparison_type "
            "{1}>, comparison_direction = #stablehlo<comparison_direction {2}>}}> : ({3}, {3}) -> "
            "tensor<i1>",
            id, comparison_type(t), ir::name(n.attrs.comparison_direction), st);
        rgn = fmt::format(
            " ({{\n    ^bb0(%lhs{0}s: {1}, %rhs{0}s: {1}):\n      %sel{0} = {2}\n"
            "      \"stablehlo.return\"(%sel{0}) : (tensor<i1>) -> ()\n    }}, {{{3}",
            id, st, sel, rgn.substr(3));
      }
    } else if (n.op == Op::scatter) {
      rgn = region("add", id, n.type.dtype);
    } else if (n.op == Op::all_reduce) {
      rgn = region(reduce_region_op(n.attrs.reduce_kind), id, n.type.dtype);
    }
    std::string props = properties(n);
    if (!props.empty()) props = " <{" + props + "}>";
    *out += fmt::format("    %{} = \"stablehlo.{}\"{}{}{} : {} -> {}\n", id, ir::op_name(n.op), ops,
                        props, rgn, types, type_text(n.type));
  }

  const Function& f_;
  const EmitOptions& o_;
  std::vector<std::string> names_;
  int64_t counter_ = 0;
};

}  // namespace

std::string dense_literal(const Array& a) {
  if (a.numel() == 0) return "dense<>";
  if (is_splat(a)) return "dense<" + element(a, 0) + ">";
  if (a.numel() > kHexThreshold && a.dtype() != DType::i1) {
    // Raw little-endian bytes, as MLIR prints large constants.
    std::string s = "dense<\"0x";
    const auto* p = static_cast<const unsigned char*>(a.raw());
    for (size_t i = 0; i < a.nbytes(); ++i) s += fmt::format("{:02X}", p[i]);
    return s + "\">";
  }
  std::string s = "dense<";
  int64_t i = 0;
  nested(a, 0, &i, &s);
  return s + ">";
}

std::string emit(const Function& f, const EmitOptions& options) {
  ir::verify(f);
  // Composites print as their decomposition into plain StableHLO ops: chlo or
  // stablehlo.composite would tie the module to one consumer's extensions. The expanded
  // program is simplified again: a gradient composite's decomposition recomputes what its
  // forward's also computes (attention's scores), which cse then shares.
  const bool composites = std::any_of(f.nodes.begin(), f.nodes.end(),
                                      [](const ir::Node& n) { return ir::is_composite(n.op); });
  if (!composites) return Printer(f, options).run();
  return Printer(passes::simplify(passes::expand_composites(f)), options).run();
}

int64_t num_replicas(const ir::Function& f) {
  int64_t n = 1;
  for (const ir::Node& nd : f.nodes)
    if (ir::is_collective(nd.op) && !nd.attrs.replica_groups.empty())
      n = std::max(n, int64_t(nd.attrs.replica_groups.size() * nd.attrs.replica_groups[0].size()));
  return n;
}

}  // namespace tlaloc::stablehlo
