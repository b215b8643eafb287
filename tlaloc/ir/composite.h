// The record of a composite op (ops.def's TLALOC_COMPOSITE lines): a fused op whose meaning is
// its decomposition into plain ops (MLX's fast::Custom). Each composite's record is defined in
// one file, tlaloc/composites/<name>.cpp, with everything about it: its type rule, its
// decomposition (what StableHLO emission, the evaluator and higher derivatives use), its VJP
// (by decomposition unless it declares its own) and, optionally, its host-lane kernel. The
// verifier, autodiff, the host planner, the evaluator and StableHLO emission consult the record
// through composite(op) and have no case of their own for any composite.
//
// ir only declares the record: the function pointers are filled in by tlaloc/composites (above
// trace, autodiff and the host runtime's kernel interface), so ir stays free of them.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::autodiff::detail {
struct RuleCtx;
}
namespace tlaloc::runtime::host {
struct Kernel;
}

namespace tlaloc::ir {

class Builder;

// An instance of the composite for the tests that walk the records: operand types and attrs.
// Integer operands are drawn in [int_lo, int_hi); i1 operands are random; float operand k in
// [ranges[k][0], ranges[k][1]) (for k past the end of ranges: [-1, 1)).
struct CompositeExample {
  std::vector<TensorType> operands;
  Attrs attrs;
  int64_t int_lo = 0, int_hi = 1;
  std::vector<std::array<double, 2>> ranges = {};
  std::array<double, 2> range(size_t k) const {
    return k < ranges.size() ? ranges[k] : std::array<double, 2>{-1, 1};
  }
};

struct Composite {
  std::string_view name;           // "tlaloc.attention"
  int min_operands, max_operands;  // optional trailing operands (e.g. a mask) make a range
  // Names of Attrs::params, in order (printed as name=value).
  std::vector<std::string_view> params;
  // Result types from the operand types and attrs. Throws tlaloc::Error naming the operand, the
  // types and the attribute that disagree (the verifier prefixes the op's name).
  std::vector<TensorType> (*infer)(std::span<const TensorType> operands, const Attrs& attrs);
  // Appends the decomposition of node n to b, reading `operands` (ids in b, one per operand of
  // n); returns one value per result.
  std::vector<ValueId> (*decompose)(Builder& b, const Node& n, std::span<const ValueId> operands);
  // Its VJP rule (autodiff/rules.h: one cotangent per operand, -1 for none); nullptr: the VJP
  // of its decomposition, inlined.
  std::vector<ValueId> (*vjp)(const autodiff::detail::RuleCtx& c) = nullptr;
  // Host-lane kernel for node `id` of f, or nullptr (no kernel, or none for this instance, e.g.
  // a dtype it does not cover): the host lane then runs the decomposition. A multi-result
  // kernel writes the values of the node's `result` nodes.
  std::unique_ptr<runtime::host::Kernel> (*host_kernel)(const Function& f, ValueId id,
                                                        int num_threads) = nullptr;
  // Instances the record-walking tests run (kernel vs decomposition, FD of the VJP, StableHLO).
  std::vector<CompositeExample> (*examples)() = nullptr;
  // A gradient composite that also yields its forward's value: result `forward_result` of this
  // node equals the single result of composite `forward` (same attrs) on this node's leading
  // operands (cross_entropy_grad's loss). passes::simplify then reads that result instead of
  // running a separate forward node, when this node's operands do not depend on it (a loss
  // whose cotangent is fixed: a mean or a weighted mean).
  std::optional<Op> forward = std::nullopt;
  int forward_result = -1;

  // The index of param `name` (throws when the record has no such param).
  size_t param(std::string_view name) const;
};

// The record of composite `op`; throws tlaloc::Error naming the op when it is not a composite.
const Composite& composite(Op op);

// Defines composite <id>'s accessor (declared below) as a record built once from the arguments,
// in Composite's member order; used once per composite in its tlaloc/composites file, at
// namespace scope outside any namespace.
#define TLALOC_COMPOSITE_RECORD(id, ...)                          \
  const ::tlaloc::ir::Composite& ::tlaloc::ir::composite_##id() { \
    static const ::tlaloc::ir::Composite record{__VA_ARGS__};     \
    return record;                                                \
  }

// One accessor per composite, defined in its tlaloc/composites file.
#define TLALOC_OP(id, str, kind, operands, facts, formula)
#define TLALOC_COMPOSITE(id, str) const Composite& composite_##id();
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP

}  // namespace tlaloc::ir
