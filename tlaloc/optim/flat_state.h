// Flat optimizer state (UpdateOptions::flat_state): the moments of every parameter of one group
// and master dtype live in one 1-D tensor per kind ("bucket"), the parameters' elements
// (row-major) back to back in the group's parameter order, so the train step updates each
// bucket with one tlaloc.adam_update / sgd_update over its gradients flattened and concatenated,
// instead of one per parameter (XLA: one or a few kernels instead of one per tensor). The
// arithmetic per element is the per-parameter update's, so parameters and state equal the
// per-parameter layout's bit for bit. Checkpoints keep the per-parameter layout
// (optim/optimizer.h): whole_state / flat_state_of convert.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/optim/optimizer.h"

namespace tlaloc::optim {

struct FlatBucket {
  // "flat.<group>" (".f64" added when the group mixes dtypes; "#<index>" when that name is
  // already another bucket's).
  std::string name;
  int group = 0;                // index into the resolved groups
  DType dtype = DType::f32;     // the master dtype of its parameters
  std::vector<int> params;      // parameter indices, in the group's order
  std::vector<int64_t> offset;  // where each parameter's elements start
  int64_t numel = 0;            // the bucket's length
};

struct FlatState {
  std::vector<FlatBucket> buckets;  // by group, then f32 before f64
  StateLayout full;                 // the per-parameter layout checkpoints hold
};

// The buckets of resolved `groups` over parameters of these master types; `full` is
// state_layout(opt, masters, names). Parameters without elements are left out of every bucket.
FlatState flat_state(const Optimizer& opt, std::span<const ParamGroup> groups,
                     std::span<const ir::TensorType> masters, std::span<const std::string> names);
// The program's layout: each bucket's slots (the full layout's kinds, shape [numel], named
// "<bucket>.<kind>", StateSlot::bucket set), then the full layout's scalars (the loss scaler's,
// the step count) as they are.
StateLayout flat_layout(const FlatState& f);

// Flat <-> per-parameter. `local_slot(j)` gives the flat layout's slot j (read one at a time).
std::vector<Array> whole_state(const FlatState& f, const StateLayout& local,
                               const std::function<Array(int)>& local_slot);
// flat_state_of throws tlaloc::Error naming the first tensor whose count, dtype or shape is not
// the per-parameter layout's.
std::vector<Array> flat_state_of(const FlatState& f, const StateLayout& local,
                                 const std::vector<Array>& full_state);

}  // namespace tlaloc::optim
