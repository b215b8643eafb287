// Internal: turns a verified ir::Function into an ordered list of kernels (steps), fusing
// elementwise nodes into groups when asked, and plans buffers by liveness into one arena.
#pragma once

#include <utility>

#include "tlaloc/core/array.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::runtime::host {

// alias: a dense view (reshape or leading-dim slice of contiguous data) read in place, at a byte
// offset into another value's storage (Plan::alias_of).
enum class Storage : uint8_t { none, input, constant, arena, output, alias };

struct Plan {
  std::vector<std::unique_ptr<Kernel>> steps;
  // Values computed at compile time (iota), stored as constants: (value, data).
  std::vector<std::pair<int32_t, Array>> precomputed;
  std::vector<Storage> storage;       // per value
  std::vector<int64_t> arena_offset;  // per value (Storage::arena)
  // Per value (Storage::alias): the value whose storage it reads, and the byte offset there.
  std::vector<std::pair<int32_t, int64_t>> alias_of;
  int64_t arena_bytes = 0, scratch_bytes = 0;
  // Per output: written directly by a step into the output buffer, or copied afterwards.
  std::vector<bool> output_direct;
  // Per alias of the function: the step may write the donated input's storage in place.
  std::vector<bool> alias_in_place;
  int num_threads = 1;
};

// options.num_threads is already resolved (compile() turns 0 into OpenMP's default).
Plan make_plan(const ir::Function& f, const Options& options);

// The storage part of make_plan, once p's steps are planned: storage, arena_offset,
// arena_bytes, scratch_bytes, output_direct, alias_in_place. Throws tlaloc::Error when a
// function donates an input twice or a step reads a value that has no storage.
void assign_storage(const ir::Function& f, Plan& p);

}  // namespace tlaloc::runtime::host
