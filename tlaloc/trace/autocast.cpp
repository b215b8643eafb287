#include "tlaloc/trace/autocast.h"

#include "tlaloc/core/error.h"

namespace tlaloc::trace {
namespace {
thread_local std::optional<DType> g_compute;
}  // namespace

Autocast::Autocast(std::optional<DType> compute) : previous_(g_compute) {
  if (compute && *compute != DType::bf16 && *compute != DType::f16 && *compute != DType::f32)
    fail("autocast: compute type {} is not bf16, f16 or f32", name(*compute));
  g_compute = compute == DType::f32 ? std::nullopt : compute;
}

Autocast::~Autocast() { g_compute = previous_; }

std::optional<DType> autocast_dtype() { return g_compute; }

Tensor dot_general(const Tensor& a, const Tensor& b, ir::DotDims dims) {
  ir::Builder& bl = a.builder();
  if (g_compute && a.dtype() == DType::f32 && b.dtype() == DType::f32)
    return {&bl, bl.dot_general(astype(a, *g_compute).id(), astype(b, *g_compute).id(),
                                std::move(dims), DType::f32)};
  return {&bl, bl.dot_general(a.id(), b.id(), std::move(dims))};
}

}  // namespace tlaloc::trace
