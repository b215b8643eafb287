#include "tlaloc/optim/zero.h"

#include <cstring>

#include "tlaloc/distributed/communicator.h"

namespace tlaloc::optim {

const ShardPiece* ZeroShard::piece(int param) const {
  for (const ShardPiece& p : pieces)
    if (p.param == param) return &p;
  return nullptr;
}

ZeroShard zero_shard(const Optimizer& opt, std::span<const ir::TensorType> masters,
                     std::span<const std::string> names, int rank, int replicas) {
  if (replicas < 1 || rank < 0 || rank >= replicas)
    fail("ZeRO: rank {} of {} processes", rank, replicas);
  ZeroShard z;
  z.rank = rank;
  z.replicas = replicas;
  z.full = state_layout(opt, masters, names);
  for (size_t i = 0; i < masters.size(); ++i) {
    const int64_t n = masters[i].shape.numel(), c = (n + replicas - 1) / replicas;
    z.numel.push_back(n);
    z.chunk.push_back(c);
    const int64_t lo = std::min(n, rank * c), hi = std::min(n, (rank + 1) * c);
    if (lo < hi) z.pieces.push_back({int(i), lo, hi});
  }
  return z;
}

StateLayout shard_layout(const ZeroShard& z) {
  StateLayout l;
  for (const ShardPiece& p : z.pieces)
    for (const StateSlot& s : z.full.slots)
      if (s.param == p.param)
        l.slots.push_back({s.name, s.kind, s.param, {s.type.dtype, Shape{p.hi - p.lo}}});
  for (const StateSlot& s : z.full.slots)  // the loss scaler's, then the step count
    if (s.param < 0) l.slots.push_back(s);
  return l;
}

std::vector<Array> gather_state(const ZeroShard& z, const StateLayout& local,
                                const std::function<Array(int)>& local_slot) {
  std::vector<Array> out;
  for (const StateSlot& s : z.full.slots) {
    if (s.param < 0) {  // the step count, the loss scale: the same on every rank
      out.push_back(local_slot(local.find(-1, s.kind)));
      continue;
    }
    const size_t i = size_t(s.param), es = size_of(s.type.dtype);
    Array chunk(s.type.dtype, Shape{z.chunk[i]});  // zeros past this rank's piece
    if (z.piece(s.param)) {
      const Array a = local_slot(local.find(s.param, s.kind));
      std::memcpy(chunk.raw(), a.raw(), a.nbytes());
    }
    Array all(s.type.dtype, Shape{z.chunk[i] * z.replicas});
    distributed::world().all_gather(chunk.raw(), all.raw(), int64_t(chunk.nbytes()));
    if (z.chunk[i] * z.replicas == z.numel[i]) {  // no padding: the gathered array is the slot
      out.push_back(std::move(all).reshaped(s.type.shape));
      continue;
    }
    Array whole(s.type.dtype, s.type.shape);
    std::memcpy(whole.raw(), all.raw(), size_t(z.numel[i]) * es);
    out.push_back(std::move(whole));
  }
  return out;
}

std::vector<Array> shard_state(const ZeroShard& z, const StateLayout& local,
                               const std::vector<Array>& full_state) {
  std::vector<Array> out;
  for (const StateSlot& s : local.slots) {
    const int j = z.full.find(s.param, s.kind);
    const Array& whole = full_state[size_t(j)];
    if (s.param < 0) {
      out.push_back(whole);
      continue;
    }
    const ShardPiece* p = z.piece(s.param);
    Array a(s.type.dtype, s.type.shape);
    const size_t es = size_of(s.type.dtype);
    std::memcpy(a.raw(), static_cast<const char*>(whole.raw()) + size_t(p->lo) * es, a.nbytes());
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace tlaloc::optim
