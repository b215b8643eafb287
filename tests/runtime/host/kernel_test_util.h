// Helpers for host kernel tests: a registry of ops that have a kernel test (walked by the
// op-list test), and a runner that executes a function fused / unfused on 1 and 2 threads and
// checks all four agree bitwise before returning the outputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <vector>

#include "tlaloc/ir/builder.h"
#include "tlaloc/runtime/host/compile.h"

namespace tlaloc::host_test {

std::set<ir::Op>& tested_ops();

// Declares a kernel test for op `id` (an ir::Op enumerator) and records it for the op walk.
#define KERNEL_TEST(id, name)                                                            \
  static const bool kRegistered_##id##_##name = (tested_ops().insert(ir::Op::id), true); \
  TEST(HostKernel, id##_##name)

// Runs f on inputs under {fuse on, off} x {1, 2 threads}; expects bitwise-equal outputs.
std::vector<Array> run_all(const ir::Function& f, const std::vector<Array>& inputs);

// Expects a's elements (any dtype, read as double) to equal `want` within `tol` (relative to
// max(1, |want|)); NaNs must match NaNs, infinities the same infinity; tol = 0 means exact (and
// -0 vs +0 distinguished).
void expect_values(const Array& a, const std::vector<double>& want, double tol = 0);

// A one-op function: parameters of the given types, `make` appends the op.
ir::Function one_op(
    const std::vector<ir::TensorType>& params,
    const std::function<ir::ValueId(ir::Builder&, std::vector<ir::ValueId>&)>& make);
// The same for an op with several results (a multi-result composite): all of them returned.
ir::Function one_op_results(
    const std::vector<ir::TensorType>& params,
    const std::function<std::vector<ir::ValueId>(ir::Builder&, std::vector<ir::ValueId>&)>& make);

// The elements of every array, in order (all results of a multi-result op as one list).
std::vector<double> flat(const std::vector<Array>& xs);

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// n values uniform in [lo, hi) from a 64-bit LCG seeded by `seed` (test inputs, not a random
// API); as an Array of dtype dt and shape s.
std::vector<double> lcg_doubles(int64_t n, uint64_t seed, double lo = -1, double hi = 1);
Array lcg_array(DType dt, Shape s, uint64_t seed, double lo = -1, double hi = 1);

// Rounds a double as the dtype stores it (independent of the runtime: via core Array).
double round_to(DType t, double v);

}  // namespace tlaloc::host_test
