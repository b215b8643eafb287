#include "tlaloc/distributed/collective.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "tlaloc/core/error.h"

namespace tlaloc::distributed {

bool runs_across_world(std::string_view op, const ReplicaGroups& groups) {
  bool singles = !groups.empty();
  int64_t replicas = 0;
  for (const auto& g : groups) {
    singles = singles && g.size() == 1;
    replicas += int64_t(g.size());
  }
  if (singles) return false;
  const int n = world().size();
  if (groups.size() == 1 && int64_t(groups[0].size()) == n) {
    bool in_order = true;
    for (int r = 0; r < n; ++r) in_order = in_order && groups[0][size_t(r)] == r;
    if (in_order) return true;
  }
  const std::string procs = fmt::format("{} process{}", n, n == 1 ? "" : "es");
  if (replicas != n)
    fail(
        "{} over replica groups {} ({} replicas), but this process group has {} (run it with "
        "mpirun -np {})",
        op, groups, replicas, procs, replicas);
  std::vector<int> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) all[size_t(r)] = r;
  fail(
      "{} over replica groups {}: the host lane runs one group of all {} in rank order ([{}]) "
      "or groups of one replica",
      op, groups, procs, all);
}

void all_reduce_widened(void* data, int64_t count, DType dtype, Reduction op) {
  if (dtype != DType::bf16 && dtype != DType::f16)
    return world().all_reduce(data, count, dtype, op);
  uint16_t* h = static_cast<uint16_t*>(data);
  const bool bf = dtype == DType::bf16;
  std::vector<float> w(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) w[size_t(i)] = bf ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
  world().all_reduce(w.data(), count, DType::f32, op);
  for (int64_t i = 0; i < count; ++i)
    h[i] = bf ? f32_to_bf16(w[size_t(i)]) : f32_to_f16(w[size_t(i)]);
}

void all_gather_along(const void* in, void* out, int64_t outer, int64_t inner_bytes,
                      void* scratch) {
  Communicator& w = world();
  const int64_t n = w.size();
  if (outer == 1) return w.all_gather(in, out, inner_bytes);
  const int64_t piece = outer * inner_bytes;  // one rank's operand
  w.all_gather(in, scratch, piece);
  const char* s = static_cast<const char*>(scratch);
  char* o = static_cast<char*>(out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < outer; ++k)
      if (inner_bytes > 0)
        std::memcpy(o + (k * n + r) * inner_bytes, s + r * piece + k * inner_bytes,
                    size_t(inner_bytes));
}

}  // namespace tlaloc::distributed
