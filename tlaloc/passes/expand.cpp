#include "tlaloc/passes/expand.h"

#include "tlaloc/ir/composite.h"

namespace tlaloc::passes {

using ir::ValueId;

ir::Function expand_composites(const ir::Function& f,
                               const std::function<bool(const ir::Function&, ValueId)>& keep) {
  std::vector<char> expand(f.nodes.size(), 0);
  bool any = false;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    expand[i] = ir::is_composite(f.nodes[i].op) && !(keep && keep(f, ValueId(i)));
    any = any || expand[i];
  }
  if (!any) return f;
  ir::Builder b(f.name);
  std::vector<ValueId> map(f.nodes.size(), -1);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    std::string nm = i < f.input_names.size() ? f.input_names[i] : "";
    map[size_t(f.inputs[i])] = b.parameter(f.input_type(int(i)), nm);
  }
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ir::Node& n = f.nodes[i];
    if (n.op == ir::Op::parameter) continue;
    if (n.op == ir::Op::result && expand[size_t(n.operands[0])]) continue;  // mapped below
    std::vector<ValueId> ops;
    for (ValueId o : n.operands) ops.push_back(map[size_t(o)]);
    if (expand[i]) {
      std::vector<ValueId> rs = ir::composite(n.op).decompose(b, n, ops);
      std::vector<ValueId> ids = ir::results_of(f, ValueId(i));
      if (rs.size() != ids.size())
        fail("{}: its decomposition gave {} values for {} results", ir::op_name(n.op), rs.size(),
             ids.size());
      for (ValueId r : ids) {  // each result node by its index
        const int64_t k = ids.size() == 1 ? 0 : f.nodes[size_t(r)].attrs.index;
        if (k < 0 || size_t(k) >= rs.size())
          fail("{}: result #{} of {} results", ir::op_name(n.op), k, rs.size());
        map[size_t(r)] = rs[size_t(k)];
      }
    } else {
      ir::Node c = n;
      c.operands = std::move(ops);
      map[i] = b.add(std::move(c));
    }
  }
  std::vector<ValueId> results;
  for (ValueId r : f.results) results.push_back(map[size_t(r)]);
  ir::Function g = b.build(results, f.output_names);
  g.aliases = f.aliases;
  return g;
}

std::vector<ValueId> inline_function(ir::Builder& b, const ir::Function& g,
                                     std::span<const ValueId> args) {
  if (args.size() != g.inputs.size())
    fail("inline {}: {} arguments for {} inputs", g.name, args.size(), g.inputs.size());
  std::vector<ValueId> map(g.nodes.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (b.type(args[i]) != g.input_type(int(i)))
      fail("inline {}: argument {} is {}, input is {}", g.name, i, to_string(b.type(args[i])),
           to_string(g.input_type(int(i))));
    map[size_t(g.inputs[i])] = args[i];
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::parameter) continue;
    ir::Node c = n;
    for (auto& o : c.operands) o = map[size_t(o)];
    map[i] = b.add(std::move(c));
  }
  std::vector<ValueId> out;
  for (ValueId r : g.results) out.push_back(map[size_t(r)]);
  return out;
}

ir::Function decomposition(const ir::Function& f, ValueId id) {
  const ir::Node& n = f.nodes[size_t(id)];
  ir::Builder b("decomposition");
  std::vector<ValueId> params;
  for (ValueId o : n.operands) params.push_back(b.parameter(f.type(o)));
  return b.build(ir::composite(n.op).decompose(b, n, params));
}

}  // namespace tlaloc::passes
