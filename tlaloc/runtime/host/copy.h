// Internal: strided n-d copies, the workhorse of the data-movement kernels (transpose,
// broadcast_in_dim, slice, concatenate, pad, dynamic_slice, dynamic_update_slice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tlaloc::runtime::host {

// Copies the box `dims`: element c goes from src[src_offset + sum(c*src_strides)] to
// dst[dst_offset + sum(c*dst_strides)] (offsets and strides in elements).
struct CopyPlan {
  std::vector<int64_t> dims, dst_strides, src_strides;
  int64_t dst_offset = 0, src_offset = 0;
  size_t elem_size = 4;
  // Drops size-1 dims and merges dims contiguous in both operands. Call once at compile time.
  void collapse();
  int64_t numel() const;
  // Runs the copy; src_shift / dst_shift are added to the offsets (dynamic starts).
  void run(void* dst, const void* src, int64_t dst_shift = 0, int64_t src_shift = 0,
           int num_threads = 1) const;
};

// Fills n elements of size elem_size at dst with the element at value.
void fill(void* dst, int64_t n, const void* value, size_t elem_size);

}  // namespace tlaloc::runtime::host
