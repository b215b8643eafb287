// Test cases that exercise every op of ir/ops.def over the dtypes it accepts: small functions
// whose inputs tlaloc::testing::sample_inputs fills. Shared by the StableHLO round-trip tests
// and the pjrt-vs-reference device tests.
#pragma once

#include <map>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::testing {

// For every op except parameter (which every case uses): at least one function using it.
std::map<ir::Op, std::vector<ir::Function>> op_cases();

}  // namespace tlaloc::testing
