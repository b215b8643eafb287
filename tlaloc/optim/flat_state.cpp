#include "tlaloc/optim/flat_state.h"

#include <cstring>
#include <set>

namespace tlaloc::optim {

FlatState flat_state(const Optimizer& opt, std::span<const ParamGroup> groups,
                     std::span<const ir::TensorType> masters, std::span<const std::string> names) {
  FlatState f;
  f.full = state_layout(opt, masters, names);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const ParamGroup& g = groups[gi];
    bool has_f64 = false;
    for (int i : g.params) {
      if (i < 0 || size_t(i) >= masters.size())
        fail("flat state: group '{}' names parameter {} of {}", g.name, i, masters.size());
      has_f64 |= masters[size_t(i)].dtype == DType::f64;
    }
    for (DType dt : {DType::f32, DType::f64}) {
      FlatBucket b;
      b.name = "flat." + g.name + (dt == DType::f64 && has_f64 ? ".f64" : "");
      b.group = int(gi);
      b.dtype = dt;
      for (int i : g.params) {
        const ir::TensorType& m = masters[size_t(i)];
        if (m.dtype != dt || m.shape.numel() == 0) continue;
        b.params.push_back(i);
        b.offset.push_back(b.numel);
        b.numel += m.shape.numel();
      }
      if (b.numel > 0) f.buckets.push_back(std::move(b));
    }
  }
  // Group names are free text ("a" with an f64 part beside a group "a.f64"): a name already
  // taken gets the bucket's index, so every state slot's name is its own.
  std::set<std::string> taken;
  for (size_t k = 0; k < f.buckets.size(); ++k) {
    const std::string base = f.buckets[k].name;
    for (int r = 0; !taken.insert(f.buckets[k].name).second; ++r)
      f.buckets[k].name = fmt::format("{}#{}{}", base, k, r ? fmt::format(".{}", r) : "");
  }
  return f;
}

StateLayout flat_layout(const FlatState& f) {
  std::vector<StateKind> kinds;  // the full layout's, for any one parameter
  for (const StateSlot& s : f.full.slots)
    if (s.param == f.full.slots.front().param && s.param >= 0) kinds.push_back(s.kind);
  StateLayout l;
  for (size_t k = 0; k < f.buckets.size(); ++k) {
    const FlatBucket& b = f.buckets[k];
    for (StateKind kind : kinds) {
      StateSlot s{b.name + "." + std::string(name(kind)), kind, -1, {b.dtype, Shape{b.numel}}};
      s.bucket = int(k);
      l.slots.push_back(std::move(s));
    }
  }
  for (const StateSlot& s : f.full.slots)  // the loss scaler's, then the step count
    if (s.param < 0) l.slots.push_back(s);
  return l;
}

std::vector<Array> whole_state(const FlatState& f, const StateLayout& local,
                               const std::function<Array(int)>& local_slot) {
  std::vector<Array> out;
  for (const StateSlot& s : f.full.slots) out.emplace_back(s.type.dtype, s.type.shape);
  for (int j = 0; j < local.size(); ++j) {
    const StateSlot& ls = local.slots[size_t(j)];
    if (ls.bucket < 0) {  // a scalar: as it is
      out[size_t(f.full.find(-1, ls.kind))] = local_slot(j);
      continue;
    }
    const FlatBucket& b = f.buckets[size_t(ls.bucket)];
    const Array flat = local_slot(j);
    const size_t es = size_of(b.dtype);
    for (size_t k = 0; k < b.params.size(); ++k) {
      Array& a = out[size_t(f.full.find(b.params[k], ls.kind))];
      std::memcpy(a.raw(), static_cast<const char*>(flat.raw()) + size_t(b.offset[k]) * es,
                  a.nbytes());
    }
  }
  return out;  // slots of parameters without elements stay empty, as they are
}

std::vector<Array> flat_state_of(const FlatState& f, const StateLayout& local,
                                 const std::vector<Array>& full_state) {
  if (full_state.size() != size_t(f.full.size()))
    fail("flat state: {} state tensors for a layout of {}", full_state.size(), f.full.size());
  for (size_t j = 0; j < full_state.size(); ++j) {
    const StateSlot& s = f.full.slots[j];
    if (full_state[j].dtype() != s.type.dtype || full_state[j].shape() != s.type.shape)
      fail("flat state: '{}' is {}, expected {}", s.name, describe(full_state[j]),
           ir::to_string(s.type));
  }
  std::vector<Array> out;
  for (const StateSlot& ls : local.slots) {
    if (ls.bucket < 0) {
      out.push_back(full_state[size_t(f.full.find(-1, ls.kind))]);
      continue;
    }
    const FlatBucket& b = f.buckets[size_t(ls.bucket)];
    Array flat(b.dtype, Shape{b.numel});
    const size_t es = size_of(b.dtype);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Array& a = full_state[size_t(f.full.find(b.params[k], ls.kind))];
      std::memcpy(static_cast<char*>(flat.raw()) + size_t(b.offset[k]) * es, a.raw(), a.nbytes());
    }
    out.push_back(std::move(flat));
  }
  return out;
}

}  // namespace tlaloc::optim
