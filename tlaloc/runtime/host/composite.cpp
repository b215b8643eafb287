// Composite nodes on the host lane: their records' kernels (ir/composite.h), or their
// decompositions where a record has none for the instance.
#include "tlaloc/ir/composite.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {

std::unique_ptr<Kernel> make_composite(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Op op = f.nodes[size_t(id)].op;
  const ir::Composite& c = ir::composite(op);
  std::unique_ptr<Kernel> k = c.host_kernel ? c.host_kernel(f, id, num_threads) : nullptr;
  if (!k) fail("host runtime: {} (%{}) has no host kernel; expand it first", ir::op_name(op), id);
  return k;
}

ir::Function expand_for_host(const ir::Function& f) {
  return passes::expand_composites(f, [](const ir::Function& g, ir::ValueId v) {
    const ir::Composite& c = ir::composite(g.nodes[size_t(v)].op);
    return c.host_kernel && c.host_kernel(g, v, 1) != nullptr;
  });
}

}  // namespace tlaloc::runtime::host
