// The VJP rule registry: one entry per plain op of ir/ops.def, in ops.def's order (checked when
// compiled, so a new op without an entry fails the build). nullptr: the op carries no cotangent
// (leaves, integer / i1 producing ops). Composites' rules are their records' (ir/composite.h).
#include <iterator>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/autodiff/rules.h"
#include "tlaloc/ir/composite.h"

namespace tlaloc::autodiff {
namespace detail {
namespace {

using ir::Op;

struct Entry {
  Op op;
  VjpRule rule;
};

constexpr Entry kEntries[] = {
    {Op::parameter, nullptr},  // a leaf: its cotangent is an output of the transform
    {Op::constant, nullptr},
    {Op::iota, nullptr},
    {Op::convert, vjp_convert},
    {Op::broadcast_in_dim, vjp_broadcast_in_dim},
    {Op::reshape, vjp_reshape},
    {Op::transpose, vjp_transpose},
    {Op::slice, vjp_slice},
    {Op::concatenate, vjp_concatenate},
    {Op::pad, vjp_pad},
    {Op::dynamic_slice, vjp_dynamic_slice},
    {Op::dynamic_update_slice, vjp_dynamic_update_slice},
    {Op::gather, vjp_gather},
    {Op::scatter, vjp_scatter},
    {Op::dot_general, vjp_dot_general},
    {Op::reduce, vjp_reduce},
    {Op::convolution, vjp_convolution},
    {Op::reverse, vjp_reverse},
    {Op::reduce_window, vjp_reduce_window},
    {Op::select_and_scatter, nullptr},  // in its operand: zero; in its source: refused
    {Op::all_reduce, vjp_all_reduce},   // sum; max / min refused (autodiff.cpp)
    {Op::all_gather, nullptr},          // refused (autodiff.cpp)
    {Op::negate, vjp_unary},
    {Op::abs, vjp_unary},
    {Op::exponential, vjp_unary},
    {Op::log, vjp_unary},
    {Op::log_plus_one, vjp_unary},
    {Op::tanh, vjp_unary},
    {Op::logistic, vjp_unary},
    {Op::sqrt, vjp_unary},
    {Op::rsqrt, vjp_unary},
    {Op::sign, vjp_zero},
    {Op::floor, vjp_zero},
    {Op::cosine, vjp_unary},
    {Op::sine, vjp_unary},
    {Op::add, vjp_add_sub},
    {Op::subtract, vjp_add_sub},
    {Op::multiply, vjp_multiply},
    {Op::divide, vjp_divide},
    {Op::maximum, vjp_max_min},
    {Op::minimum, vjp_max_min},
    {Op::power, vjp_power},
    {Op::remainder, vjp_remainder},
    {Op::and_, nullptr},
    {Op::or_, nullptr},
    {Op::xor_, nullptr},
    {Op::shift_left, nullptr},
    {Op::shift_right_logical, nullptr},
    {Op::compare, nullptr},
    {Op::select, vjp_select},
    {Op::clamp, vjp_clamp},
    {Op::result, nullptr},  // backward() routes its cotangent to its composite
};

constexpr size_t kNumPlainOps = 0
#define TLALOC_OP(id, str, kind, operands, facts, formula) +1
#define TLALOC_COMPOSITE(id, str)
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP
    ;

constexpr bool listed_in_order() {
  if (std::size(kEntries) != kNumPlainOps) return false;
  for (size_t i = 0; i < kNumPlainOps; ++i)
    if (kEntries[i].op != ir::kAllOps[i]) return false;
  return true;
}
static_assert(listed_in_order(), "kEntries lists every plain op of ops.def once, in its order");

}  // namespace

VjpRule vjp_rule(Op op) {
  if (ir::is_composite(op)) {
    const VjpRule r = ir::composite(op).vjp;
    return r ? r : vjp_by_decomposition;
  }
  return kEntries[size_t(op)].rule;
}

}  // namespace detail

bool differentiable(ir::Op op) { return detail::vjp_rule(op) != nullptr; }

}  // namespace tlaloc::autodiff
