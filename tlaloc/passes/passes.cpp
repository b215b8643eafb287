// dce, cse, simplify, and the rebuild helper they share with fold.cpp.
#include "tlaloc/passes/passes.h"

#include <algorithm>
#include <unordered_map>

#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/rebuild.h"

namespace tlaloc::passes {
namespace detail {

using ir::Op;
using ir::ValueId;

Rebuild::Rebuild(ir::Function src) : f(std::move(src)), map(f.nodes.size(), -1) {
  out.nodes.reserve(f.nodes.size());
  out.name = f.name;
  out.input_names = f.input_names;
  out.output_names = f.output_names;
  out.aliases = f.aliases;
}

ValueId Rebuild::emit(ir::Node n) {
  out.nodes.push_back(std::move(n));
  return ValueId(out.nodes.size() - 1);
}

ValueId Rebuild::copy(ValueId id) {
  ir::Node n = std::move(f.nodes[size_t(id)]);
  for (auto& o : n.operands) o = map[size_t(o)];
  return map[size_t(id)] = emit(std::move(n));
}

ir::Function Rebuild::finish() {
  for (ValueId v : f.inputs) out.inputs.push_back(map[size_t(v)]);
  for (ValueId v : f.results) out.results.push_back(map[size_t(v)]);
  return std::move(out);
}

ir::Function verified(ir::Function f, const char* pass) {
  try {
    ir::verify(f);
  } catch (const Error& e) {
    fail("passes::{}: the rewritten function {} fails verification: {}", pass, f.name, e.what());
  }
  return f;
}

ir::Function dce(ir::Function f, bool* changed) {
  std::vector<char> live(f.nodes.size(), 0);
  for (ValueId r : f.results) live[size_t(r)] = 1;
  for (ValueId v : f.inputs) live[size_t(v)] = 1;
  for (size_t i = f.nodes.size(); i-- > 0;)
    if (live[i])
      for (ValueId o : f.nodes[i].operands) live[size_t(o)] = 1;
  // Every result node of a live composite stays, so they stay adjacent to it (ir.h).
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ir::Node& n = f.nodes[i];
    if (n.op == Op::result && n.operands.size() == 1 && n.operands[0] >= 0 &&
        size_t(n.operands[0]) < i && live[size_t(n.operands[0])])
      live[i] = 1;
  }
  size_t before = f.nodes.size();
  Rebuild rb(std::move(f));
  for (size_t i = 0; i < before; ++i)
    if (live[i]) rb.copy(ValueId(i));
  if (changed) *changed = rb.out.nodes.size() != before;
  return rb.finish();
}

namespace {

// ops.def's kCommutative fact, and compare EQ / NE.
bool commutative(const ir::Node& n) {
  if (n.op == Op::compare)
    return n.attrs.comparison_direction == ir::Comparison::EQ ||
           n.attrs.comparison_direction == ir::Comparison::NE;
  return ir::has_fact(n.op, ir::kCommutative);
}

size_t hash_node(const ir::Node& n) {
  size_t h = std::hash<int>()(int(n.op)) * 1000003u;
  for (ValueId o : n.operands) h = (h ^ std::hash<int>()(o)) * 1000003u;
  for (int64_t d : n.type.shape.dims) h = (h ^ std::hash<int64_t>()(d)) * 1000003u;
  h ^= size_t(n.type.dtype);
  if (n.attrs.value) h ^= std::hash<int64_t>()(n.attrs.value->numel()) * 31u;
  return h;
}

}  // namespace

ir::Function cse(ir::Function f_in, bool* changed) {
  Rebuild rb(std::move(f_in));
  const ir::Function& f = rb.f;
  std::unordered_multimap<size_t, ValueId> seen;  // hash -> new id
  bool any = false;
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    // Parameters are distinct; collectives stay one call each (every rank makes the same calls).
    if (f.nodes[i].op == Op::parameter || ir::is_collective(f.nodes[i].op)) {
      rb.copy(ValueId(i));
      continue;
    }
    ir::Node n = std::move(rb.f.nodes[i]);
    for (auto& o : n.operands) o = rb.map[size_t(o)];
    if (commutative(n) && n.operands[0] > n.operands[1]) std::swap(n.operands[0], n.operands[1]);
    size_t h = hash_node(n);
    ValueId found = -1;
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi && found < 0; ++it) {
      const ir::Node& m = rb.out.nodes[size_t(it->second)];
      if (m.op == n.op && m.type == n.type && m.operands == n.operands && m.attrs == n.attrs)
        found = it->second;
    }
    if (found >= 0) {
      rb.map[i] = found;
      any = true;
      continue;
    }
    ValueId id = rb.emit(std::move(n));
    rb.map[i] = id;
    seen.emplace(h, id);
  }
  if (changed) *changed = any;
  return rb.finish();
}

}  // namespace detail

ir::Function dce(const ir::Function& f) { return detail::verified(detail::dce(f, nullptr), "dce"); }
ir::Function cse(const ir::Function& f) { return detail::verified(detail::cse(f, nullptr), "cse"); }
ir::Function fold_constants(const ir::Function& f) {
  return detail::verified(detail::fold(f, nullptr), "fold_constants");
}

ir::Function merge_forward_into_grad(const ir::Function& f) {
  return detail::verified(detail::merge(f, nullptr), "merge_forward_into_grad");
}

ir::Function simplify(const ir::Function& f) {
  ir::Function g = f;  // the one copy: the rounds below move nodes
  for (int round = 0; round < 32; ++round) {
    bool a = false, b = false, m = false, c = false;
    g = detail::cse(std::move(g), &a);
    g = detail::fold(std::move(g), &b);
    g = detail::merge(std::move(g), &m);
    g = detail::dce(std::move(g), &c);
    if (!a && !b && !m && !c) break;
  }
  return detail::verified(std::move(g), "simplify");
}

}  // namespace tlaloc::passes
