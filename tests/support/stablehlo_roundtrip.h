// Test helper: StableHLO emission checked without a GPU. emit(f) -> parse -> run equals run(f)
// on the same inputs, bit for bit, and the parsed function keeps f's signature, names and
// aliases. Used by tests/stablehlo for every op; the lead's recipe tests call it on the full
// train steps (disc, fmnist, LM).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::testing {

// Runs a function on inputs (one per input) and returns its outputs.
using Runner = std::function<std::vector<Array>(const ir::Function&, std::span<const Array>)>;

// The lane that runs both sides: the host lane (runtime::host::compile, default options).
Runner default_runner();

// Emits `f`, parses the text and expects (gtest EXPECT_*): same input/output types, names and
// aliases; outputs of the parsed function on `inputs` bitwise equal to those of `f` (with its
// composites expanded, as emitted: passes::expand_composites); and
// emit(parse(emit(f))) == emit(f). Returns the emitted text (for further checks). With
// TLALOC_STABLEHLO_DUMP_DIR set, each text is also written there as NNNN_<f.name>.mlir (to
// feed to mlir-opt or a PJRT client by hand).
std::string expect_stablehlo_roundtrip(const ir::Function& f, std::span<const Array> inputs,
                                       const Runner& run = default_runner());

// Deterministic inputs of f's input types from `seed`: floats uniform in [-2, 2], s32/u32 in
// [0, 8) (so that row indices are mostly in range, some out of it), i1 alternating.
std::vector<Array> sample_inputs(const ir::Function& f, uint64_t seed = 1);

}  // namespace tlaloc::testing
