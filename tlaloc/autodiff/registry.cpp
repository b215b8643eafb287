// The VJP rule registry: one entry per op of ir/ops.def, in one table indexed by ir::Op.
// nullptr: the op carries no cotangent (leaves, integer / i1 producing ops).
#include <array>
#include <iterator>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/autodiff/rules.h"

namespace tlaloc::autodiff {
namespace detail {
namespace {

using ir::Op;
constexpr size_t kNumOps = std::size(ir::kAllOps);

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
    {Op::attention, vjp_attention},
    {Op::attention_grad, vjp_by_decomposition},
    {Op::layer_norm, vjp_layer_norm},
    {Op::layer_norm_grad, vjp_by_decomposition},
    {Op::cross_entropy, vjp_cross_entropy},
    {Op::cross_entropy_grad, vjp_by_decomposition},
    {Op::gelu, vjp_gelu},
    {Op::gelu_grad, vjp_gelu_grad},
};

// Table indexed by ir::Op; built once, checked to list every op exactly once.
struct Table {
  std::array<VjpRule, kNumOps> rules{};
  std::array<int, kNumOps> listed{};
  Table() {
    for (const Entry& e : kEntries) {
      rules[size_t(e.op)] = e.rule;
      listed[size_t(e.op)]++;
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

VjpRule vjp_rule(Op op) {
  const Table& t = table();
  if (size_t(op) >= kNumOps || t.listed[size_t(op)] != 1)
    fail("autodiff: op {} is not listed exactly once in the VJP registry", ir::op_name(op));
  return t.rules[size_t(op)];
}

}  // namespace detail

bool differentiable(ir::Op op) { return detail::vjp_rule(op) != nullptr; }

}  // namespace tlaloc::autodiff
