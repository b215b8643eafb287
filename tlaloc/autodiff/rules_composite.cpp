// The VJP of a composite through its decomposition (MLX's fallback for fused ops): composites
// whose record declares no rule of their own (ir/composite.h), and multi-result cases a rule
// hands back (a cotangent on attention's log-sum-exp).
#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/autodiff/rules.h"
#include "tlaloc/ir/composite.h"
#include "tlaloc/passes/expand.h"

namespace tlaloc::autodiff::detail {

Grads vjp_by_decomposition(const RuleCtx& c) {
  const ir::Node& n = c.n;
  ir::Builder db("decomposition");
  std::vector<ValueId> params;
  std::vector<int> wrt;
  for (size_t i = 0; i < n.operands.size(); ++i) {
    ir::TensorType t = c.type(c.operand(i));
    params.push_back(db.parameter(t));
    if (is_floating(t.dtype) && c.need[i]) wrt.push_back(int(i));
  }
  Grads out(n.operands.size(), -1);
  if (wrt.empty()) return out;
  ir::Function g = db.build(ir::composite(n.op).decompose(db, n, params));
  ir::Function gv = vjp(g, wrt);  // inputs: operands..., one cotangent per result
  std::vector<ValueId> args(n.operands.begin(), n.operands.end());
  for (size_t k = 0; k < c.cts.size(); ++k) {
    if (c.cts[k] >= 0) {
      args.push_back(c.cts[k]);
      continue;
    }
    const ir::TensorType t = c.type(c.outs[k]);
    ValueId z = c.b.scalar(t.dtype, 0);
    args.push_back(t.shape.rank() == 0 ? z : c.b.broadcast_in_dim(z, t.shape, {}));
  }
  std::vector<ValueId> res = passes::inline_function(c.b, gv, args);
  for (size_t j = 0; j < wrt.size(); ++j) out[size_t(wrt[j])] = res[j];
  return out;
}

}  // namespace tlaloc::autodiff::detail
