// StableHLO reader for the subset that stablehlo::emit prints (see emit.h): one module with one
// func.func @main, ops in MLIR's generic form, the narrowed gather / scatter / reduce forms, and
// the tf.aliasing_output / tlaloc.name argument attributes. parse(emit(f)) is a function that
// computes what f computes (same inputs, outputs, aliases and names; a reduce's init constant
// is folded back into the reduce). Anything outside the subset is rejected.
#pragma once

#include <string_view>

#include "tlaloc/ir/ir.h"

namespace tlaloc::stablehlo {

// Parses and verifies a module. Throws tlaloc::Error "stablehlo::parse: line L column C: ..."
// naming what was expected and what was found (an unknown op or attribute, a type that
// disagrees with the inferred one, a gather that is not a row gather, ...).
ir::Function parse(std::string_view text);

}  // namespace tlaloc::stablehlo
