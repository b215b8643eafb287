// Turns the syntax tree of parse.cpp into a verified ir::Function (see parse.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "tlaloc/ir/builder.h"
#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/stablehlo/parse_ast.h"

namespace tlaloc::stablehlo::detail {
namespace {

using ir::Op;
using ir::TensorType;
using ir::ValueId;

const Attr& need(const OpAst& o, const std::string& key, Attr::Kind kind) {
  auto it = o.attrs.find(key);
  if (it == o.attrs.end()) error_at(o.loc, fmt::format("{} needs attribute '{}'", o.name, key));
  if (it->second.kind != kind)
    error_at(it->second.loc, fmt::format("{}: attribute '{}' has the wrong kind", o.name, key));
  return it->second;
}

// Only these attribute names may appear on the op.
void allow(const OpAst& o, std::initializer_list<const char*> keys) {
  for (auto& [k, v] : o.attrs) {
    bool ok = false;
    for (const char* a : keys) ok = ok || k == a;
    if (!ok) error_at(v.loc, fmt::format("{}: unsupported attribute '{}'", o.name, k));
  }
}

void optional_false(const OpAst& o, const char* key) {
  auto it = o.attrs.find(key);
  if (it != o.attrs.end() && (it->second.kind != Attr::Bool || it->second.i != 0))
    error_at(it->second.loc, fmt::format("{}: only {} = false is supported", o.name, key));
}

void expect_dn(const OpAst& o, const Attr& a, const char* kind,
               const std::map<std::string, std::vector<int64_t>>& want) {
  auto strip = [](std::map<std::string, std::vector<int64_t>> m) {
    for (auto it = m.begin(); it != m.end();) it = it->second.empty() ? m.erase(it) : ++it;
    return m;
  };
  if (a.s != kind || strip(a.dn) != strip(want)) {
    std::vector<std::string> w;
    for (auto& [k, v] : strip(want)) w.push_back(fmt::format("{} = [{}]", k, fmt::join(v, ", ")));
    error_at(a.loc, fmt::format("{}: tlaloc reads only the row form along axis 0 of the operand "
                                "(#{}<{}>)",
                                o.name, kind, fmt::join(w, ", ")));
  }
}

// The scalar region of reduce / scatter: returns its op name ("add", ...).
std::string region_op(const OpAst& o, DType t) {
  TensorType scalar{t, {}};
  if (!o.has_region || o.block_args.size() != 2 || o.block_arg_types[0] != scalar ||
      o.block_arg_types[1] != scalar || o.region.size() != 2)
    error_at(o.loc, fmt::format("{}: the region must take two {} and apply one op", o.name,
                                type_text(scalar)));
  const OpAst& r = o.region[0];
  const OpAst& ret = o.region[1];
  std::set<std::string> args(o.block_args.begin(), o.block_args.end()),
      used(r.operands.begin(), r.operands.end());
  if (r.name.rfind("stablehlo.", 0) != 0 || r.operands.size() != 2 || used != args ||
      r.result_types != std::vector<TensorType>{scalar} || ret.name != "stablehlo.return" ||
      ret.operands != std::vector<std::string>{r.result})
    error_at(r.loc, fmt::format("{}: the region must be one binary op on its two arguments and "
                                "stablehlo.return of its result",
                                o.name));
  return r.name.substr(10);
}

class Build {
 public:
  explicit Build(const ModuleAst& m) : m_(m), b_(m.name) {}

  ir::Function run() {
    module_attrs();
    std::vector<ir::Alias> aliases;
    for (size_t i = 0; i < m_.args.size(); ++i) {
      const Argument& a = m_.args[i];
      std::string nm;
      for (auto& [k, v] : a.attrs) {
        if (k == "tf.aliasing_output" && v.kind == Attr::Int)
          aliases.push_back({int(v.i), int(i)});
        else if (k == "tlaloc.name" && v.kind == Attr::Str)
          nm = v.s;
        else
          error_at(v.loc, fmt::format("argument {}: unsupported attribute '{}'", a.name, k));
      }
      define(a.name, b_.parameter(a.type, nm), a.loc);
    }
    for (const OpAst& o : m_.ops)
      for (size_t k = 0; k < o.operands.size(); ++k)
        if (((o.name == "stablehlo.reduce" || o.name == "stablehlo.reduce_window") && k == 1) ||
            (o.name == "stablehlo.select_and_scatter" && k == 2))
          init_uses_.insert(o.operands[k]);
        else
          other_uses_.insert(o.operands[k]);
    if (m_.ops.empty() || m_.ops.back().name != "func.return")
      error_at(m_.ops.empty() ? Loc{} : m_.ops.back().loc, "@main must end with func.return");
    for (size_t i = 0; i + 1 < m_.ops.size(); ++i) op(m_.ops[i]);
    const OpAst& ret = m_.ops.back();
    std::vector<ValueId> results = operands(ret);
    if (ret.operand_types != m_.result_types)
      error_at(ret.loc, "func.return types differ from the function's result types");
    std::vector<std::string> out_names;
    for (const AttrDict& d : m_.result_attrs)
      for (auto& [k, v] : d)
        if (k != "tlaloc.name" || v.kind != Attr::Str)
          error_at(v.loc, fmt::format("result: unsupported attribute '{}'", k));
    bool named = false;
    for (const AttrDict& d : m_.result_attrs) named = named || d.count("tlaloc.name");
    if (named)
      for (const AttrDict& d : m_.result_attrs)
        out_names.push_back(d.count("tlaloc.name") ? d.at("tlaloc.name").s : "");
    ir::Function f = b_.build(results, out_names);
    f.aliases = aliases;
    try {
      ir::verify(f);
    } catch (const Error& e) {
      error_at(m_.args.empty() ? Loc{} : m_.args[0].loc, e.what());
    }
    return f;
  }

 private:
  // mhlo.num_replicas (any count: the collectives' replica_groups say which replicas they
  // combine) and mhlo.num_partitions = 1.
  void module_attrs() {
    for (auto& [k, v] : m_.attrs)
      if ((k != "mhlo.num_partitions" && k != "mhlo.num_replicas") || v.kind != Attr::Int ||
          v.i < 1 || (k == "mhlo.num_partitions" && v.i != 1))
        error_at(v.loc, fmt::format("module attribute '{}' is not supported (tlaloc reads "
                                    "mhlo.num_partitions = 1 and mhlo.num_replicas >= 1)",
                                    k));
  }

  void define(const std::string& name, ValueId v, Loc l) {
    if (values_.count(name) || inits_.count(name))
      error_at(l, fmt::format("redefinition of {}", name));
    values_[name] = v;
  }

  ValueId value(const std::string& name, Loc l) {
    auto it = values_.find(name);
    if (it == values_.end()) error_at(l, fmt::format("use of undefined value {}", name));
    return it->second;
  }

  std::vector<ValueId> operands(const OpAst& o) {
    std::vector<ValueId> v;
    if (o.operand_types.size() != o.operands.size())
      error_at(o.loc, fmt::format("{}: {} operands but {} operand types", o.name, o.operands.size(),
                                  o.operand_types.size()));
    for (size_t k = 0; k < o.operands.size(); ++k) {
      ValueId id = value(o.operands[k], o.operand_locs[k]);
      if (b_.type(id) != o.operand_types[k])
        error_at(o.operand_locs[k],
                 fmt::format("{}: operand {} is {} but the op says {}", o.name, o.operands[k],
                             type_text(b_.type(id)), type_text(o.operand_types[k])));
      v.push_back(id);
    }
    return v;
  }

  void op(const OpAst& o) {
    if (o.name.rfind("stablehlo.", 0) != 0 || o.name == "stablehlo.parameter")
      error_at(o.loc, fmt::format("unsupported op '{}'", o.name));
    Op op;
    try {
      op = ir::op_from_name(o.name.substr(10));
    } catch (const Error&) {
      error_at(o.loc, fmt::format("unsupported op '{}'", o.name));
    }
    if (o.result.empty() || o.result_types.size() != 1)
      error_at(o.loc, fmt::format("{} must define exactly one value", o.name));
    if (o.has_region && op != Op::reduce && op != Op::scatter && op != Op::reduce_window &&
        op != Op::select_and_scatter && op != Op::all_reduce)
      error_at(o.loc, fmt::format("{} takes no region", o.name));
    if (o.has_region2 && op != Op::select_and_scatter)
      error_at(o.loc, fmt::format("{} takes one region", o.name));
    const TensorType& declared = o.result_types[0];
    ir::Node n{op, declared, {}, {}};
    ir::Attrs& a = n.attrs;
    if (op == Op::constant) {
      allow(o, {"value"});
      a.value = need(o, "value", Attr::Dense).dense;
      if (a.value->dtype() != declared.dtype || a.value->shape() != declared.shape)
        error_at(o.loc, "constant: value type differs from the result type");
      if (init_uses_.count(o.result) && !other_uses_.count(o.result)) {
        if (values_.count(o.result) || inits_.count(o.result))
          error_at(o.loc, fmt::format("redefinition of {}", o.result));
        inits_[o.result] = a.value;  // folded into the reduce that uses it
        return;
      }
      return finish(o, std::move(n));
    }
    if (op == Op::reduce || op == Op::reduce_window) return reduce(o, std::move(n));
    if (op == Op::select_and_scatter) return select_and_scatter(o, std::move(n));
    n.operands = operands(o);
    auto ints = [&](const char* k) { return need(o, k, Attr::I64Array).ints; };
    const auto& in = o.operand_types;
    switch (op) {
      case Op::iota:
        allow(o, {"iota_dimension"});
        a.dimension = need(o, "iota_dimension", Attr::Int).i;
        break;
      case Op::broadcast_in_dim:
        allow(o, {"broadcast_dimensions"});
        a.broadcast_dimensions = ints("broadcast_dimensions");
        break;
      case Op::transpose:
        allow(o, {"permutation"});
        a.permutation = ints("permutation");
        break;
      case Op::slice:
        allow(o, {"start_indices", "limit_indices", "strides"});
        a.start_indices = ints("start_indices");
        a.limit_indices = ints("limit_indices");
        a.strides = ints("strides");
        break;
      case Op::concatenate:
        allow(o, {"dimension"});
        a.dimension = need(o, "dimension", Attr::Int).i;
        break;
      case Op::pad:
        allow(o, {"edge_padding_low", "edge_padding_high", "interior_padding"});
        a.edge_padding_low = ints("edge_padding_low");
        a.edge_padding_high = ints("edge_padding_high");
        a.interior_padding = ints("interior_padding");
        break;
      case Op::dynamic_slice:
        allow(o, {"slice_sizes"});
        a.slice_sizes = ints("slice_sizes");
        break;
      case Op::gather: {
        allow(o, {"dimension_numbers", "indices_are_sorted", "slice_sizes"});
        optional_false(o, "indices_are_sorted");
        if (in.size() != 2) break;  // the verifier reports the arity
        int64_t r = in[0].shape.rank(), m = in[1].shape.rank();
        std::vector<int64_t> offset, sizes{1};
        for (int64_t i = 1; i < r; ++i) {
          offset.push_back(m + i - 1);
          sizes.push_back(in[0].shape[i]);
        }
        expect_dn(o, need(o, "dimension_numbers", Attr::DimNumbers), "stablehlo.gather",
                  {{"offset_dims", offset},
                   {"collapsed_slice_dims", {0}},
                   {"start_index_map", {0}},
                   {"index_vector_dim", {m}}});
        if (ints("slice_sizes") != sizes)
          error_at(o.loc, fmt::format("gather: slice_sizes must be [{}] for a row gather",
                                      fmt::join(sizes, ", ")));
        break;
      }
      case Op::scatter: {
        allow(o, {"scatter_dimension_numbers", "indices_are_sorted", "unique_indices"});
        optional_false(o, "indices_are_sorted");
        optional_false(o, "unique_indices");
        if (in.size() != 3) break;
        int64_t r = in[0].shape.rank(), m = in[1].shape.rank();
        std::vector<int64_t> window;
        for (int64_t i = 1; i < r; ++i) window.push_back(m + i - 1);
        expect_dn(o, need(o, "scatter_dimension_numbers", Attr::DimNumbers), "stablehlo.scatter",
                  {{"update_window_dims", window},
                   {"inserted_window_dims", {0}},
                   {"scatter_dims_to_operand_dims", {0}},
                   {"index_vector_dim", {m}}});
        if (region_op(o, in[0].dtype) != "add")
          error_at(o.loc, "scatter: tlaloc reads only scatter-add (an add region)");
        break;
      }
      case Op::dot_general: {
        allow(o, {"dot_dimension_numbers", "precision_config"});
        const Attr& d = need(o, "dot_dimension_numbers", Attr::DimNumbers);
        if (d.s != "stablehlo.dot") error_at(d.loc, "dot_general needs #stablehlo.dot<...>");
        for (auto& [k, v] : d.dn) {
          if (k == "lhs_batching_dimensions")
            a.lhs_batching_dimensions = v;
          else if (k == "rhs_batching_dimensions")
            a.rhs_batching_dimensions = v;
          else if (k == "lhs_contracting_dimensions")
            a.lhs_contracting_dimensions = v;
          else if (k == "rhs_contracting_dimensions")
            a.rhs_contracting_dimensions = v;
          else
            error_at(d.loc, fmt::format("dot_general: unsupported dimension field '{}'", k));
        }
        if (o.attrs.count("precision_config"))
          for (const Attr& p : o.attrs.at("precision_config").list)
            if (p.kind != Attr::Enum || p.enum_kind != "precision")
              error_at(p.loc, "dot_general: precision_config holds #stablehlo<precision X>");
        // A result type other than the operands' is JAX's preferred_element_type.
        if (o.result_types[0].dtype != in[0].dtype)
          a.preferred_element_type = o.result_types[0].dtype;
        break;
      }
      case Op::reverse:
        allow(o, {"dimensions"});
        a.dimensions = ints("dimensions");
        break;
      case Op::convolution:
        convolution(o, a);
        break;
      case Op::all_reduce:
      case Op::all_gather:
        collective(o, n);
        break;
      case Op::compare: {
        allow(o, {"comparison_direction", "compare_type"});
        const Attr& d = need(o, "comparison_direction", Attr::Enum);
        bool found = false;
        for (auto c : {ir::Comparison::EQ, ir::Comparison::NE, ir::Comparison::LT,
                       ir::Comparison::LE, ir::Comparison::GT, ir::Comparison::GE})
          if (d.enum_kind == "comparison_direction" && ir::name(c) == d.s) {
            a.comparison_direction = c;
            found = true;
          }
        if (!found) error_at(d.loc, fmt::format("compare: bad comparison_direction '{}'", d.s));
        if (o.attrs.count("compare_type") && !in.empty()) {
          const Attr& t = o.attrs.at("compare_type");
          if (t.kind != Attr::Enum || t.s != comparison_type(in[0].dtype))
            error_at(t.loc, fmt::format("compare: compare_type must be {} for {}",
                                        comparison_type(in[0].dtype), type_text(in[0])));
        }
        break;
      }
      default:
        allow(o, {});
    }
    finish(o, std::move(n));
  }

  // all_reduce / all_gather: replica_groups [groups, size], optional channel_handle (type 1)
  // with use_global_device_ids; all_reduce's region one add / maximum / minimum.
  static void collective(const OpAst& o, ir::Node& n) {
    ir::Attrs& a = n.attrs;
    if (n.op == Op::all_reduce) {
      allow(o, {"replica_groups", "channel_handle", "use_global_device_ids"});
      const DType t = o.operand_types.empty() ? n.type.dtype : o.operand_types[0].dtype;
      const std::string rop = region_op(o, t);
      bool found = false;
      for (auto k : {ir::ReduceKind::sum, ir::ReduceKind::max, ir::ReduceKind::min})
        if (reduce_region_op(k) == rop) {
          a.reduce_kind = k;
          found = true;
        }
      if (!found)
        error_at(o.region[0].loc, fmt::format("all_reduce: unsupported region op '{}'", rop));
    } else {
      allow(o, {"all_gather_dim", "replica_groups", "channel_handle", "use_global_device_ids"});
      a.dimension = need(o, "all_gather_dim", Attr::Int).i;
    }
    const Attr& g = need(o, "replica_groups", Attr::I64Dense);
    const std::vector<int64_t>& shape = g.dn.at("shape");
    if (shape.size() != 2)
      error_at(g.loc, fmt::format("{}: replica_groups must be a [groups, size] tensor", o.name));
    for (int64_t i = 0; i < shape[0]; ++i)
      a.replica_groups.emplace_back(g.ints.begin() + i * shape[1],
                                    g.ints.begin() + (i + 1) * shape[1]);
    const bool global = o.attrs.count("use_global_device_ids") > 0;
    if (global && o.attrs.at("use_global_device_ids").kind != Attr::Bool)
      error_at(o.attrs.at("use_global_device_ids").loc,
               fmt::format("{}: use_global_device_ids is a unit attribute", o.name));
    if (auto it = o.attrs.find("channel_handle"); it != o.attrs.end()) {
      const Attr& c = it->second;
      const auto h = c.dn.find("handle"), t = c.dn.find("type");
      if (c.kind != Attr::DimNumbers || c.s != "stablehlo.channel_handle" || c.dn.size() != 2 ||
          h == c.dn.end() || t == c.dn.end() || h->second.size() != 1 || h->second[0] < 1 ||
          t->second != std::vector<int64_t>{1} || !global)
        error_at(c.loc, fmt::format("{}: tlaloc reads channel_handle<handle = K >= 1, type = 1> "
                                    "with use_global_device_ids",
                                    o.name));
      a.channel_id = h->second[0];
    } else if (global) {
      error_at(o.loc, fmt::format("{}: use_global_device_ids needs a channel_handle", o.name));
    }
  }

  // convolution's attributes as emit.cpp prints them (window_reversal, if given, all false).
  static void convolution(const OpAst& o, ir::Attrs& a) {
    allow(o, {"batch_group_count", "dimension_numbers", "feature_group_count", "lhs_dilation",
              "padding", "precision_config", "rhs_dilation", "window_strides", "window_reversal"});
    a.conv_dimension_numbers = conv_layout(need(o, "dimension_numbers", Attr::ConvLayout));
    const size_t ns = a.conv_dimension_numbers.input_spatial_dimensions.size();
    auto ints = [&](const char* k) {  // absent: 1 per spatial dim (StableHLO's default)
      return o.attrs.count(k) ? need(o, k, Attr::I64Array).ints : std::vector<int64_t>(ns, 1);
    };
    a.window_strides = ints("window_strides");
    a.lhs_dilation = ints("lhs_dilation");
    a.rhs_dilation = ints("rhs_dilation");
    a.feature_group_count = need(o, "feature_group_count", Attr::Int).i;
    a.batch_group_count = need(o, "batch_group_count", Attr::Int).i;
    if (o.attrs.count("padding")) {
      const Attr& p = need(o, "padding", Attr::I64Dense);
      if (p.dn.at("shape") != std::vector<int64_t>{int64_t(ns), 2})
        error_at(p.loc, fmt::format("convolution: padding must be a tensor<{}x2xi64>", ns));
      for (size_t i = 0; i < ns; ++i) {
        a.padding_low.push_back(p.ints[2 * i]);
        a.padding_high.push_back(p.ints[2 * i + 1]);
      }
    } else {
      a.padding_low.assign(ns, 0);
      a.padding_high.assign(ns, 0);
    }
    if (o.attrs.count("window_reversal")) {
      const Attr& r = o.attrs.at("window_reversal");
      bool ok = r.kind == Attr::List;  // array<i1: false, ...> is not read; a list of false is
      for (const Attr& e : r.list) ok = ok && e.kind == Attr::Bool && e.i == 0;
      if (!ok) error_at(r.loc, "convolution: window_reversal is not supported");
    }
    if (o.attrs.count("precision_config"))
      for (const Attr& p : o.attrs.at("precision_config").list)
        if (p.kind != Attr::Enum || p.enum_kind != "precision")
          error_at(p.loc, "convolution: precision_config holds #stablehlo<precision X>");
  }

  // The init operand `k` of o: a constant folded into the op, which must be `want`.
  void expect_init(const OpAst& o, size_t k, const Array& want, std::string_view rop) {
    auto it = inits_.find(o.operands[k]);
    if (it == inits_.end() || !it->second->bitwise_equal(want))
      error_at(o.operand_locs[k],
               fmt::format("{}: init {} must be a constant {} (the identity of {})", o.name,
                           o.operands[k], dense_literal(want), rop));
  }

  // reduce_window / select_and_scatter attributes; padding is a [rank, 2] i64 tensor.
  void window_attrs(const OpAst& o, ir::Attrs& a, bool dilations) {
    auto ints = [&](const char* k) { return need(o, k, Attr::I64Array).ints; };
    a.window_dimensions = ints("window_dimensions");
    const size_t r = a.window_dimensions.size();
    auto optional = [&](const char* k, int64_t fill) {
      return o.attrs.count(k) ? ints(k) : std::vector<int64_t>(r, fill);
    };
    a.window_strides = optional("window_strides", 1);
    if (dilations) {
      a.base_dilations = optional("base_dilations", 1);
      a.window_dilations = optional("window_dilations", 1);
    }
    a.padding_low.assign(r, 0);
    a.padding_high.assign(r, 0);
    if (o.attrs.count("padding")) {
      const Attr& p = need(o, "padding", Attr::I64Dense);
      auto sh = p.dn.find("shape");
      if (sh == p.dn.end() || sh->second != std::vector<int64_t>{int64_t(r), 2})
        error_at(p.loc, fmt::format("{}: padding must be a tensor<{}x2xi64>", o.name, r));
      for (size_t i = 0; i < r; ++i) {
        a.padding_low[i] = p.ints[2 * i];
        a.padding_high[i] = p.ints[2 * i + 1];
      }
    }
  }

  void select_and_scatter(const OpAst& o, ir::Node n) {
    allow(o, {"window_dimensions", "window_strides", "padding"});
    if (o.operands.size() != 3 || o.operand_types.size() != 3)
      error_at(o.loc, "select_and_scatter: tlaloc reads an operand, a source and an init value");
    const DType t = o.operand_types[0].dtype;
    const TensorType scalar{t, {}};
    // The select region: one compare of its two arguments, returned.
    if (!o.has_region || !o.has_region2 || o.block_args.size() != 2 ||
        o.block_arg_types != std::vector<TensorType>{scalar, scalar} || o.region.size() != 2 ||
        o.region[0].name != "stablehlo.compare" || o.region[0].operands != o.block_args ||
        o.region[1].name != "stablehlo.return" ||
        o.region[1].operands != std::vector<std::string>{o.region[0].result})
      error_at(o.loc, fmt::format("select_and_scatter: the select region must return "
                                  "compare(%arg0, %arg1) of two {}",
                                  type_text(scalar)));
    const Attr& d = need(o.region[0], "comparison_direction", Attr::Enum);
    bool found = false;
    for (auto c : {ir::Comparison::GE, ir::Comparison::GT, ir::Comparison::LE, ir::Comparison::LT})
      if (d.s == ir::name(c)) {
        n.attrs.comparison_direction = c;
        found = true;
      }
    if (!found) error_at(d.loc, fmt::format("select_and_scatter: select '{}' (GE GT LE LT)", d.s));
    OpAst scatter;  // the second region, checked as a reduce region
    scatter.loc = o.loc;
    scatter.name = o.name;
    scatter.has_region = true;
    scatter.block_args = o.block_args2;
    scatter.block_arg_types = o.block_arg_types2;
    scatter.region = o.region2;
    const std::string rop = region_op(scatter, t);
    if (rop != "add")
      error_at(o.region2[0].loc, "select_and_scatter: the scatter region must be an add");
    expect_init(o, 2, reduce_identity(ir::ReduceKind::sum, t), rop);
    for (size_t k = 0; k < 2; ++k) {
      n.operands.push_back(value(o.operands[k], o.operand_locs[k]));
      if (b_.type(n.operands[k]) != o.operand_types[k])
        error_at(o.operand_locs[k], "select_and_scatter: operand type differs from the op's");
    }
    window_attrs(o, n.attrs, false);
    finish(o, std::move(n));
  }

  void reduce(const OpAst& o, ir::Node n) {
    const bool window = n.op == Op::reduce_window;
    if (window)
      allow(o, {"window_dimensions", "window_strides", "base_dilations", "window_dilations",
                "padding"});
    else
      allow(o, {"dimensions"});
    if (o.operands.size() != 2 || o.operand_types.size() != 2)
      error_at(o.loc, fmt::format("{}: tlaloc reads one operand and one init value", o.name));
    DType t = o.operand_types[0].dtype;
    std::string rop = region_op(o, t);
    bool found = false;
    for (auto k : {ir::ReduceKind::sum, ir::ReduceKind::max, ir::ReduceKind::min})
      if (reduce_region_op(k) == rop) {
        n.attrs.reduce_kind = k;
        found = true;
      }
    if (!found)
      error_at(o.region[0].loc, fmt::format("{}: unsupported region op '{}'", o.name, rop));
    expect_init(o, 1, reduce_identity(n.attrs.reduce_kind, t), rop);
    n.operands = {value(o.operands[0], o.operand_locs[0])};
    if (b_.type(n.operands[0]) != o.operand_types[0])
      error_at(o.operand_locs[0],
               fmt::format("{}: operand type differs from the op's operand type", o.name));
    if (window)
      window_attrs(o, n.attrs, true);
    else
      n.attrs.dimensions = need(o, "dimensions", Attr::I64Array).ints;
    finish(o, std::move(n));
  }

  void finish(const OpAst& o, ir::Node n) {
    ValueId id;
    try {
      id = b_.add(std::move(n));
    } catch (const Error& e) {
      error_at(o.loc, e.what());
    }
    if (b_.type(id) != o.result_types[0])
      error_at(o.loc, fmt::format("{}: declared result {} but it infers {}", o.name,
                                  type_text(o.result_types[0]), type_text(b_.type(id))));
    define(o.result, id, o.loc);
  }

  const ModuleAst& m_;
  ir::Builder b_;
  std::map<std::string, ValueId> values_;
  std::map<std::string, std::shared_ptr<const Array>> inits_;
  std::set<std::string> init_uses_, other_uses_;
};

}  // namespace

ir::Function build_function(const ModuleAst& m) { return Build(m).run(); }

}  // namespace tlaloc::stablehlo::detail
