// Internal: constructors of the compute kernels (reduce, dot_general). `id` is the node's value.
#pragma once

#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::runtime::host {

std::unique_ptr<Kernel> make_reduce(const ir::Function& f, int32_t id);
// dot_general through OpenBLAS sgemm / dgemm; bf16 / f16 convert to f32, sgemm, round back.
std::unique_ptr<Kernel> make_dot(const ir::Function& f, int32_t id, int num_threads);

}  // namespace tlaloc::runtime::host
