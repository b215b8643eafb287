// Storage of a plan's values (plan.h: assign_storage): inputs, constants, aliases, outputs
// written in place, donated inputs overwritten in place, and the rest in one arena by liveness.
#include <algorithm>

#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/plan.h"

namespace tlaloc::runtime::host {

namespace {

using ir::Op;

// First-fit allocator over a growing arena, 64-byte granules.
class Arena {
 public:
  int64_t alloc(int64_t bytes) {
    bytes = std::max<int64_t>((bytes + 63) / 64 * 64, 64);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      int64_t at = it->first;
      if (it->second == bytes)
        free_.erase(it);
      else
        *it = {at + bytes, it->second - bytes};
      return at;
    }
    int64_t at = top_;
    top_ += bytes;
    return at;
  }
  void release(int64_t at, int64_t bytes) {
    bytes = std::max<int64_t>((bytes + 63) / 64 * 64, 64);
    auto it = std::lower_bound(free_.begin(), free_.end(), std::pair<int64_t, int64_t>{at, 0});
    it = free_.insert(it, {at, bytes});
    if (auto nx = std::next(it); nx != free_.end() && it->first + it->second == nx->first) {
      it->second += nx->second;
      free_.erase(nx);
    }
    if (it != free_.begin()) {
      auto pv = std::prev(it);
      if (pv->first + pv->second == it->first) {
        pv->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t size() const { return top_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> free_;  // (offset, bytes), sorted by offset
  int64_t top_ = 0;
};

}  // namespace

void assign_storage(const ir::Function& f, Plan& p) {
  const size_t nv = f.nodes.size();
  const int64_t ns = int64_t(p.steps.size());
  p.storage.assign(nv, Storage::none);
  p.arena_offset.assign(nv, -1);
  for (ir::ValueId v : f.inputs) p.storage[size_t(v)] = Storage::input;
  for (size_t i = 0; i < nv; ++i)
    if (f.nodes[i].op == Op::constant) p.storage[i] = Storage::constant;
  for (const auto& [v, a] : p.precomputed) p.storage[size_t(v)] = Storage::constant;
  for (size_t i = 0; i < nv; ++i)
    if (p.alias_of[i].first >= 0) p.storage[i] = Storage::alias;

  std::vector<int64_t> writer(nv, -1), last_read(nv, -1);
  for (int64_t s = 0; s < ns; ++s) {
    for (int32_t v : p.steps[size_t(s)]->writes) writer[size_t(v)] = s;
    for (int32_t v : p.steps[size_t(s)]->reads) last_read[size_t(v)] = s;
  }
  // A value read through an alias stays live (and un-overwritten) while the alias is read; an
  // alias's source precedes it, so one pass from the last value back covers chains.
  for (size_t i = nv; i-- > 0;)
    if (int32_t src = p.alias_of[i].first; src >= 0)
      last_read[size_t(src)] = std::max(last_read[size_t(src)], last_read[i]);
  // Outputs: the first output naming a computed value is written in place by its step.
  p.output_direct.assign(size_t(f.num_outputs()), false);
  std::vector<bool> seen(nv, false);
  for (int i = 0; i < f.num_outputs(); ++i) {
    ir::ValueId v = f.results[size_t(i)];
    if (writer[size_t(v)] >= 0 && !seen[size_t(v)]) {
      p.output_direct[size_t(i)] = true;
      p.storage[size_t(v)] = Storage::output;
    }
    seen[size_t(v)] = true;
  }
  // In-place donation: the step writing output i may write input j's storage if every read of
  // input j happens before that step, or in it as an element-wise read of a fused loop. Reads
  // of an alias of input j (a dense slice or reshape read in place) read that storage too:
  // last_read covers them; within the step they count as not element-wise, since the step
  // knows its donor by value id only (a concatenate of slices of j, rolling j by a row, would
  // overwrite rows it has yet to read).
  auto reads_alias_of = [&](const Kernel& k, ir::ValueId x) {
    for (int32_t v : k.reads)
      for (int32_t src = p.alias_of[size_t(v)].first; src >= 0; src = p.alias_of[size_t(src)].first)
        if (src == x) return true;
    return false;
  };
  std::vector<int> donated(size_t(f.num_inputs()), 0);
  for (const ir::Alias& a : f.aliases)
    if (donated[size_t(a.input)]++)
      fail("function {}: input {} is donated to more than one output", f.name, a.input);
  for (const ir::Alias& a : f.aliases) {
    ir::ValueId v = f.results[size_t(a.output)], x = f.inputs[size_t(a.input)];
    bool ok = p.output_direct[size_t(a.output)];
    if (ok) {
      int64_t s = writer[size_t(v)], lr = last_read[size_t(x)];
      const Kernel& k = *p.steps[size_t(s)];
      if (lr == s) {
        auto cnt = [&](const std::vector<int32_t>& l) { return std::count(l.begin(), l.end(), x); };
        ok = cnt(k.reads) == cnt(k.in_place) && k.writes.size() >= 1 && !reads_alias_of(k, x);
      } else {
        ok = lr < s;
      }
    }
    p.alias_in_place.push_back(ok);
  }
  // Arena by liveness: a value lives from the step writing it to the last step reading it.
  Arena arena;
  std::vector<std::vector<int32_t>> dies(static_cast<size_t>(ns));
  for (int64_t s = 0; s < ns; ++s) {
    for (int32_t v : p.steps[size_t(s)]->writes) {
      if (p.storage[size_t(v)] != Storage::none) continue;
      p.storage[size_t(v)] = Storage::arena;
      int64_t bytes = int64_t(f.type(v).shape.numel() * int64_t(size_of(f.type(v).dtype)));
      p.arena_offset[size_t(v)] = arena.alloc(bytes);
      dies[size_t(std::max(last_read[size_t(v)], s))].push_back(v);
    }
    for (int32_t v : dies[size_t(s)]) {
      int64_t bytes = int64_t(f.type(v).shape.numel() * int64_t(size_of(f.type(v).dtype)));
      arena.release(p.arena_offset[size_t(v)], bytes);
    }
    p.scratch_bytes = std::max(p.scratch_bytes, p.steps[size_t(s)]->scratch_bytes);
  }
  p.arena_bytes = arena.size();
  for (const auto& k : p.steps)
    for (int32_t v : k->reads)
      if (p.storage[size_t(v)] == Storage::none)
        fail("host runtime: internal error: step '{}' reads %{} ({}), which has no storage",
             k->label, v, ir::op_name(f.nodes[size_t(v)].op));
}

}  // namespace tlaloc::runtime::host
