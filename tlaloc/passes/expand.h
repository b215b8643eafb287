// Composites (ir/composite.h) replaced by their decompositions, and functions inlined into
// builders: what StableHLO emission, the host lane (for composites without a kernel), the
// evaluator and VJPs by decomposition share.
#pragma once

#include <functional>
#include <span>

#include "tlaloc/ir/builder.h"

namespace tlaloc::passes {

// f with every composite node (and its result nodes) replaced by its decomposition, except those
// `keep` returns true for (same inputs, outputs, names and aliases). Returns f unchanged when
// nothing is replaced.
ir::Function expand_composites(
    const ir::Function& f,
    const std::function<bool(const ir::Function&, ir::ValueId)>& keep = nullptr);

// Appends the nodes of `g` to `b` with g's inputs bound to `args` (ids in b, one per input of
// g, same types); returns the ids of g's results in b. Throws tlaloc::Error on a count or type
// mismatch.
std::vector<ir::ValueId> inline_function(ir::Builder& b, const ir::Function& g,
                                         std::span<const ir::ValueId> args);

// The decomposition of composite node `id` of f as a function of its operands (one input per
// operand, one output per result).
ir::Function decomposition(const ir::Function& f, ir::ValueId id);

}  // namespace tlaloc::passes
