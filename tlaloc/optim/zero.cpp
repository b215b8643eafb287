#include "tlaloc/optim/zero.h"

#include <cstring>

#include "tlaloc/distributed/communicator.h"

namespace tlaloc::optim {

ZeroShard zero_shard(const Optimizer& opt, std::span<const ir::TensorType> masters,
                     std::span<const std::string> names, int rank, int replicas) {
  if (replicas < 1 || rank < 0 || rank >= replicas)
    fail("ZeRO: rank {} of {} processes", rank, replicas);
  ZeroShard z;
  z.rank = rank;
  z.replicas = replicas;
  z.full = state_layout(opt, masters, names);
  int64_t total = 0;
  for (size_t i = 0; i < masters.size(); ++i) {
    if (masters[i].dtype != masters[0].dtype)
      fail("ZeRO-1 shards one flat vector of the parameters: '{}' is {} but '{}' is {}",
           names.size() > i ? names[i] : std::to_string(i), name(masters[i].dtype),
           names.empty() ? "0" : names[0], name(masters[0].dtype));
    z.offset.push_back(total);
    z.numel.push_back(masters[i].shape.numel());
    total += z.numel.back();
  }
  z.shard_size = (total + replicas - 1) / replicas;
  const int64_t first = int64_t(rank) * z.shard_size, last = first + z.shard_size;
  for (size_t i = 0; i < masters.size(); ++i) {
    const int64_t lo = std::max(first, z.offset[i]), hi = std::min(last, z.offset[i] + z.numel[i]);
    if (lo < hi) z.pieces.push_back({int(i), lo - z.offset[i], hi - z.offset[i], lo - first});
  }
  return z;
}

StateLayout shard_layout(const ZeroShard& z) {
  StateLayout l;
  for (const ShardPiece& p : z.pieces)
    for (const StateSlot& s : z.full.slots)
      if (s.param == p.param)
        l.slots.push_back({s.name, s.kind, s.param, {s.type.dtype, Shape{p.hi - p.lo}}});
  l.slots.push_back(z.full.slots.back());  // the step count
  return l;
}

std::vector<Array> gather_state(const ZeroShard& z, const StateLayout& local,
                                const std::vector<Array>& local_state) {
  std::vector<Array> out(z.full.slots.size());
  out.back() = local_state.back();  // the step count: the same on every rank
  for (StateKind kind : {StateKind::momentum_buffer, StateKind::exp_avg, StateKind::exp_avg_sq,
                         StateKind::max_exp_avg_sq}) {
    int any = -1;
    for (int j = 0; j + 1 < z.full.size(); ++j)
      if (z.full.slots[size_t(j)].kind == kind) any = j;
    if (any < 0) continue;
    const DType dt = z.full.slots[size_t(any)].type.dtype;
    const size_t es = size_of(dt);
    Array shard(dt, Shape{z.shard_size});
    for (const ShardPiece& p : z.pieces) {
      const Array& a = local_state[size_t(local.find(p.param, kind))];
      std::memcpy(static_cast<char*>(shard.raw()) + size_t(p.at) * es, a.raw(), a.nbytes());
    }
    Array all(dt, Shape{z.shard_size * z.replicas});
    distributed::world().all_gather(shard.raw(), all.raw(), int64_t(shard.nbytes()));
    for (int j = 0; j + 1 < z.full.size(); ++j) {
      const StateSlot& s = z.full.slots[size_t(j)];
      if (s.kind != kind) continue;
      Array a(s.type.dtype, s.type.shape);
      std::memcpy(a.raw(),
                  static_cast<const char*>(all.raw()) + size_t(z.offset[size_t(s.param)]) * es,
                  a.nbytes());
      out[size_t(j)] = std::move(a);
    }
  }
  return out;
}

std::vector<Array> shard_state(const ZeroShard& z, const StateLayout& local,
                               const std::vector<Array>& full_state) {
  std::vector<Array> out;
  for (const StateSlot& s : local.slots) {
    const int j = s.param < 0 ? z.full.step_index() : z.full.find(s.param, s.kind);
    const Array& whole = full_state[size_t(j)];
    if (s.param < 0) {
      out.push_back(whole);
      continue;
    }
    const ShardPiece* p = nullptr;
    for (const ShardPiece& q : z.pieces)
      if (q.param == s.param) p = &q;
    Array a(s.type.dtype, s.type.shape);
    const size_t es = size_of(s.type.dtype);
    std::memcpy(a.raw(), static_cast<const char*>(whole.raw()) + size_t(p->lo) * es, a.nbytes());
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace tlaloc::optim
