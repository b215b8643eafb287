// Internal: data-movement kernels and the views that let fused loops read broadcast /
// transposed / sliced / reshaped operands without materializing them.
#pragma once

#include <optional>

#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/host/elementwise.h"

namespace tlaloc::runtime::host {

// The view of node `n` (broadcast_in_dim, transpose, slice or reshape) given its operand's
// view. nullopt when the op cannot be expressed as a strided view of x's storage (a reshape of
// a non-contiguous view).
std::optional<View> view_of(const ir::Node& n, const View& x);

// A kernel writing the dense value `out` (type t) from the view v.
std::unique_ptr<Kernel> make_view_copy(const View& v, int32_t out, int num_threads);

// Kernels for iota, concatenate, pad, dynamic_slice, dynamic_update_slice, gather, scatter
// (and broadcast_in_dim / transpose / slice / reshape through make_view_copy). `id` is the
// node's value id.
std::unique_ptr<Kernel> make_structural(const ir::Function& f, int32_t id, int num_threads);

}  // namespace tlaloc::runtime::host
