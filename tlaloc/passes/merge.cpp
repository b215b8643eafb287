// merge: a forward composite node whose value a gradient composite also yields
// (ir/composite.h: Composite::forward) is replaced by that result, so the forward's work (for
// cross-entropy: a sweep over every logit) runs once, inside the gradient's kernel.
#include <algorithm>
#include <utility>

#include "tlaloc/ir/composite.h"
#include "tlaloc/passes/rebuild.h"

namespace tlaloc::passes::detail {
namespace {

using ir::Op;
using ir::ValueId;

// Whether node `target` is an ancestor of node g's operands. Nodes below `target` cannot be
// (the order is topological), so the walk stops there.
bool depends_on(const ir::Function& f, ValueId g, ValueId target, std::vector<char>& seen) {
  std::fill(seen.begin(), seen.end(), 0);
  std::vector<ValueId> stack(f.nodes[size_t(g)].operands.begin(),
                             f.nodes[size_t(g)].operands.end());
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (v == target) return true;
    if (v < target || seen[size_t(v)]) continue;
    seen[size_t(v)] = 1;
    for (ValueId o : f.nodes[size_t(v)].operands) stack.push_back(o);
  }
  return false;
}

// For each forward node, the gradient's result node that replaces it (-1: none).
std::vector<ValueId> replacements(const ir::Function& f) {
  std::vector<ValueId> repl(f.nodes.size(), -1);
  std::vector<char> seen(f.nodes.size(), 0);
  for (size_t j = 0; j < f.nodes.size(); ++j) {
    const ir::Node& g = f.nodes[j];
    if (!ir::is_composite(g.op)) continue;
    const ir::Composite& rec = ir::composite(g.op);
    if (!rec.forward) continue;
    const ValueId r = ir::results_of(f, ValueId(j))[size_t(rec.forward_result)];
    for (size_t i = 0; i < j; ++i) {
      const ir::Node& n = f.nodes[i];
      if (n.op != *rec.forward || repl[i] >= 0 || n.type != f.type(r) || !(n.attrs == g.attrs) ||
          n.operands.size() > g.operands.size() ||
          !std::equal(n.operands.begin(), n.operands.end(), g.operands.begin()) ||
          ir::is_multi_result(f, ValueId(i)))
        continue;
      if (depends_on(f, ValueId(j), ValueId(i), seen)) continue;
      repl[i] = r;
      break;  // one forward node per gradient node
    }
  }
  return repl;
}

}  // namespace

ir::Function merge(ir::Function f_in, bool* changed) {
  const std::vector<ValueId> repl = replacements(f_in);
  const bool any = std::any_of(repl.begin(), repl.end(), [](ValueId r) { return r >= 0; });
  if (changed) *changed = any;
  if (!any) return f_in;
  Rebuild rb(std::move(f_in));
  const ir::Function& f = rb.f;
  // The node that emits v: a result node's composite.
  auto unit = [&](ValueId v) {
    const ir::Node& n = f.nodes[size_t(v)];
    return n.op == Op::result ? n.operands[0] : v;
  };
  // A replaced forward node reads as its replacement once that is emitted.
  auto resolve = [&](ValueId v) {
    if (repl[size_t(v)] >= 0 && rb.map[size_t(repl[size_t(v)])] >= 0)
      rb.map[size_t(v)] = rb.map[size_t(repl[size_t(v)])];
  };
  // Emits node `root` (with its result nodes) after whatever it reads that is not emitted yet:
  // a gradient node moves up to where its forward's value is first read.
  std::vector<char> on_stack(f.nodes.size(), 0);
  auto emit = [&](ValueId root) {
    std::vector<std::pair<ValueId, size_t>> stack{{root, 0}};
    on_stack[size_t(root)] = 1;
    while (!stack.empty()) {
      const ValueId v = stack.back().first;
      const size_t k = stack.back().second;
      const std::vector<ValueId>& ops = f.nodes[size_t(v)].operands;
      if (k < ops.size()) {
        ++stack.back().second;
        const ValueId o = ops[k];
        const ValueId t = repl[size_t(o)] >= 0 ? repl[size_t(o)] : o;
        if (rb.map[size_t(t)] >= 0) continue;  // emitted (its node is moved out)
        const ValueId u = unit(t);
        if (!on_stack[size_t(u)]) {
          on_stack[size_t(u)] = 1;
          stack.push_back({u, 0});
        }
        continue;
      }
      stack.pop_back();
      for (ValueId o : ops) resolve(o);
      const int results = ir::is_multi_result(f, v) ? ir::num_results(f, v) : 0;
      rb.copy(v);
      for (int r = 1; r <= results; ++r) rb.copy(v + r);
    }
  };
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const ValueId v = ValueId(i);
    if (rb.map[i] >= 0) continue;
    if (repl[i] >= 0) {
      if (rb.map[size_t(repl[i])] < 0) emit(unit(repl[i]));
      resolve(v);
      continue;
    }
    if (f.nodes[i].op == Op::result) continue;  // emitted with its composite
    emit(v);
  }
  return rb.finish();
}

}  // namespace tlaloc::passes::detail
