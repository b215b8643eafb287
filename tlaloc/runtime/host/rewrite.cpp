// Rewrites before planning (see rewrite.h).
#include "tlaloc/runtime/host/rewrite.h"

#include <algorithm>

#include "tlaloc/passes/rebuild.h"

namespace tlaloc::runtime::host {
namespace {

using ir::Op;
using Dims = std::vector<int64_t>;

Dims free_dims(int64_t rank, const Dims& batch, const Dims& contract) {
  Dims f;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contract.begin(), contract.end(), d) == contract.end())
      f.push_back(d);
  return f;
}

// dot(.., transpose(x, perm), ..) -> dot(.., x, ..) with the operand's dims mapped through perm,
// when the free dims keep their relative order (so the result layout is unchanged).
bool fold_operand(ir::Function& f, ir::Node& dot, size_t which) {
  const ir::Node& t = f.nodes[size_t(dot.operands[which])];
  if (t.op != Op::transpose) return false;
  auto& a = dot.attrs;
  Dims& batch = which == 0 ? a.lhs_batching_dimensions : a.rhs_batching_dimensions;
  Dims& contract = which == 0 ? a.lhs_contracting_dimensions : a.rhs_contracting_dimensions;
  const Dims& perm = t.attrs.permutation;
  Dims fr = free_dims(int64_t(perm.size()), batch, contract);
  for (size_t i = 1; i < fr.size(); ++i)
    if (perm[size_t(fr[i - 1])] > perm[size_t(fr[i])]) return false;
  for (int64_t& d : batch) d = perm[size_t(d)];
  for (int64_t& d : contract) d = perm[size_t(d)];
  dot.operands[which] = t.operands[0];
  return true;
}

// transpose(dot(a, b)) that swaps the lhs-free and rhs-free result dims -> dot(b, a).
bool swap_dot(ir::Function& f, ir::Node& t, const std::vector<int>& uses) {
  ir::ValueId d = t.operands[0];
  const ir::Node& dot = f.nodes[size_t(d)];
  if (dot.op != Op::dot_general || uses[size_t(d)] != 1) return false;
  const auto& a = dot.attrs;
  int64_t nb = int64_t(a.lhs_batching_dimensions.size());
  int64_t nlf =
      f.type(dot.operands[0]).shape.rank() - nb - int64_t(a.lhs_contracting_dimensions.size());
  int64_t r = t.type.shape.rank(), nrf = r - nb - nlf;
  Dims want;
  for (int64_t i = 0; i < nb; ++i) want.push_back(i);
  for (int64_t i = 0; i < nrf; ++i) want.push_back(nb + nlf + i);
  for (int64_t i = 0; i < nlf; ++i) want.push_back(nb + i);
  if (t.attrs.permutation != want) return false;
  ir::Node n;
  n.op = Op::dot_general;
  n.type = t.type;
  n.operands = {dot.operands[1], dot.operands[0]};
  n.attrs.lhs_batching_dimensions = a.rhs_batching_dimensions;
  n.attrs.rhs_batching_dimensions = a.lhs_batching_dimensions;
  n.attrs.lhs_contracting_dimensions = a.rhs_contracting_dimensions;
  n.attrs.rhs_contracting_dimensions = a.lhs_contracting_dimensions;
  t = std::move(n);
  return true;
}

}  // namespace

ir::Function fold_transposes_into_dots(const ir::Function& in) {
  ir::Function f = in;
  std::vector<int> uses(f.nodes.size(), 0);
  for (const ir::Node& n : f.nodes)
    for (ir::ValueId o : n.operands) ++uses[size_t(o)];
  for (ir::ValueId r : f.results) ++uses[size_t(r)];
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    ir::Node& n = f.nodes[i];
    if (n.op == Op::transpose) swap_dot(f, n, uses);
    if (n.op == Op::dot_general)
      for (size_t w = 0; w < 2; ++w) {
        ir::ValueId before = n.operands[w];
        if (fold_operand(f, n, w)) {
          --uses[size_t(before)];
          ++uses[size_t(n.operands[w])];
        }
      }
  }
  return f;
}

namespace {

bool reduces_a_concatenation(const ir::Function& f, const ir::Node& n) {
  if (n.op != Op::reduce || n.operands.size() != 1) return false;
  const ir::Node& c = f.nodes[size_t(n.operands[0])];
  // A 16-bit sum is accumulated in f32 and rounded once: partial sums rounded to bf16 / f16,
  // then added in bf16 / f16, would round once per piece (max and min round nothing).
  const bool rounds = n.attrs.reduce_kind == ir::ReduceKind::sum &&
                      (n.type.dtype == DType::bf16 || n.type.dtype == DType::f16);
  return !rounds && c.op == Op::concatenate && c.type.shape.rank() == 1 &&
         n.attrs.dimensions == Dims{0};
}

Op combine_op(ir::ReduceKind k) {
  switch (k) {
    case ir::ReduceKind::sum:
      return Op::add;
    case ir::ReduceKind::max:
      return Op::maximum;
    case ir::ReduceKind::min:
      return Op::minimum;
  }
  return Op::add;
}

}  // namespace

ir::Function split_reductions_of_concatenations(const ir::Function& f) {
  // The concatenations' pieces, by the reduction that reads them (read before Rebuild moves the
  // nodes out).
  std::vector<std::vector<ir::ValueId>> pieces(f.nodes.size());
  bool any = false;
  for (size_t i = 0; i < f.nodes.size(); ++i)
    if (reduces_a_concatenation(f, f.nodes[i])) {
      pieces[i] = f.nodes[size_t(f.nodes[i].operands[0])].operands;
      any = true;
    }
  if (!any) return f;
  passes::detail::Rebuild rb(f);
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    if (pieces[i].empty()) {
      rb.copy(ir::ValueId(i));
      continue;
    }
    // One reduction per piece (a dead concatenation is skipped by the planner), then the
    // partial results combined left to right.
    const ir::Node n = std::move(rb.f.nodes[i]);
    ir::ValueId acc = -1;
    for (ir::ValueId piece : pieces[i]) {
      ir::Node r = n;
      r.operands = {rb.map[size_t(piece)]};
      const ir::ValueId part = rb.emit(std::move(r));
      acc = acc < 0 ? part
                    : rb.emit(ir::Node{combine_op(n.attrs.reduce_kind), n.type, {acc, part}, {}});
    }
    rb.map[i] = acc;
  }
  return rb.finish();
}

}  // namespace tlaloc::runtime::host
