// Internal to tlaloc/ir's verifier: the error context every type rule reports through, and the
// attribute rules of the convolution, window and collective ops (verifier_rules.cpp), which
// verifier.cpp's infer_structural calls.
#pragma once

#include <fmt/format.h>

#include <set>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/ir.h"

namespace tlaloc::ir::verifier {

using Dims = std::vector<int64_t>;

inline std::string types_str(std::span<const TensorType> ts) {
  std::vector<std::string> v;
  for (auto& t : ts) v.push_back(to_string(t));
  return fmt::format("({})", fmt::join(v, ", "));
}

struct Ctx {
  Op op;
  std::span<const TensorType> in;
  template <typename... A>
  [[noreturn]] void error(fmt::format_string<A...> f, A&&... a) const {
    fail("{}: {} (operands {})", op_name(op), fmt::format(f, std::forward<A>(a)...), types_str(in));
  }
  void arity(size_t n) const {
    if (in.size() != n) error("expects {} operands, got {}", n, in.size());
  }
  // Every entry of `dims` a distinct axis in [0, rank).
  void axes(const Dims& dims, int64_t rank, const char* what) const {
    std::set<int64_t> seen;
    for (int64_t d : dims) {
      if (d < 0 || d >= rank) error("{} {} out of range for rank {}", what, d, rank);
      if (!seen.insert(d).second) error("{} repeats axis {}", what, d);
    }
  }
};

// The windows of reduce_window along one dimension (StableHLO's num_windows), in 128-bit
// arithmetic so huge attributes cannot wrap.
int64_t num_windows(const Ctx& c, int64_t n, int64_t base_dilation, int64_t lo, int64_t hi,
                    int64_t window, int64_t window_dilation, int64_t stride);
// all_reduce / all_gather: replica_groups non-empty, groups of one size >= 1, ids distinct and
// >= 0; channel_id >= 0. Returns the group size.
int64_t replica_group_checks(const Ctx& c, const Attrs& a);
// reduce_window / select_and_scatter attributes: one entry per operand dimension each, window
// and strides (and dilations) >= 1, padding >= 0 (a narrowing of StableHLO).
void window_checks(const Ctx& c, int64_t r, const Attrs& a, bool dilations);
// StableHLO convolution's constraints (spec C1-C27, without window_reversal and quantization).
TensorType infer_convolution(const Ctx& c, const Attrs& a);

}  // namespace tlaloc::ir::verifier
