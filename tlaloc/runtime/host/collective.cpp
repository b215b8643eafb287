// all_reduce / all_gather over distributed::world() (distributed/collective.h). The kernel runs
// on the thread that runs the step (the team's thread 0, the one that initialised MPI), never
// in parallel parts: MPI is FUNNELED. Its result has storage of its own (plan.cpp), so the
// operand is copied first and then reduced in place.
#include <cstring>

#include <fmt/format.h>

#include "tlaloc/distributed/collective.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {
namespace {

struct CollectiveKernel : Kernel {
  bool gather = false;
  ir::Op op = ir::Op::all_reduce;
  std::vector<std::vector<int64_t>> groups;
  distributed::Reduction reduction = distributed::Reduction::sum;
  DType dtype = DType::f32;
  int32_t x = -1, out = -1;
  int64_t count = 0;                   // elements of the operand
  int64_t outer = 1, inner_bytes = 0;  // all_gather: the operand as [outer, inner_bytes]

  static void exec(const Kernel& kk, const Frame& f) {
    auto& k = as<CollectiveKernel>(kk);
    const bool across = distributed::runs_across_world(ir::op_name(k.op), k.groups);
    const void* in = f.ptr[k.x];
    void* y = f.ptr[k.out];
    const size_t bytes = size_t(k.count) * size_of(k.dtype);
    if (!across || !k.gather) {
      if (bytes > 0 && in != y) std::memcpy(y, in, bytes);
      if (across) distributed::all_reduce_widened(y, k.count, k.dtype, k.reduction);
      return;
    }
    distributed::all_gather_along(in, y, k.outer, k.inner_bytes, f.scratch);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_collective(const ir::Function& f, int32_t id) {
  const ir::Node& n = f.nodes[size_t(id)];
  const ir::Attrs& a = n.attrs;
  const ir::TensorType& xt = f.type(n.operands[0]);
  auto k = std::make_unique<CollectiveKernel>();
  k->op = n.op;
  k->gather = n.op == ir::Op::all_gather;
  k->groups = a.replica_groups;
  k->reduction = a.reduce_kind == ir::ReduceKind::sum   ? distributed::Reduction::sum
                 : a.reduce_kind == ir::ReduceKind::max ? distributed::Reduction::max
                                                        : distributed::Reduction::min;
  k->dtype = xt.dtype;
  k->x = n.operands[0];
  k->out = id;
  k->count = xt.shape.numel();
  if (k->gather) {
    for (int64_t d = 0; d < a.dimension; ++d) k->outer *= xt.shape[d];
    k->inner_bytes = k->outer == 0 ? 0 : k->count * int64_t(size_of(xt.dtype)) / k->outer;
    // The ranks' operands one after another, before they are laid along the dimension.
    if (k->outer > 1) k->scratch_bytes = int64_t(checked_nbytes(n.type.dtype, n.type.shape));
  }
  k->run = &CollectiveKernel::exec;
  k->reads = n.operands;
  k->writes = {id};
  k->label = fmt::format("{} {}", ir::op_name(n.op), to_string(n.type));
  return k;
}

}  // namespace tlaloc::runtime::host
