// Internal: fused elementwise groups. A group of elementwise IR nodes over the same number of
// elements n is compiled into a small register program (loads, instructions, stores) that runs
// block by block (kBlock elements); each instruction is one tight loop over the block. Threads
// take contiguous ranges of blocks (static partition), so results do not depend on scheduling.
// bf16 / f16 values live in float registers and are rounded to nearest even after every op,
// exactly as the unfused kernels round, so fused and unfused results are bitwise equal.
#pragma once

#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::runtime::host {

// Where the elements of a value are: element with row-major coordinates c of `shape` lives at
// offset + sum(c[d] * strides[d]) in the storage of value `src`.
struct View {
  int32_t src = -1;
  DType dtype = DType::f32;
  Shape shape;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  bool dense() const;       // a row-major buffer at `offset` (strides of a dense shape)
  bool contiguous() const;  // identity map over a dense row-major buffer (dense, offset 0)
};
View dense_view(int32_t src, const ir::TensorType& t);

// Builds one group's program. Registers are virtual until finish() allocates them by liveness.
class ProgramBuilder {
 public:
  ProgramBuilder(int64_t n, int max_threads);
  ~ProgramBuilder();
  // Loads a value (numel n, or 1 for a scalar broadcast) into a new register.
  int load(const View& v);
  // Appends the elementwise node `node` (Unary / Binary / Ternary kind, including convert)
  // whose operands are the given registers of the given dtypes.
  int op(const ir::Node& node, const std::vector<int>& regs, const std::vector<DType>& dtypes);
  // Register reinterpretation (reshape of a member): no instruction.
  int alias(int reg) { return reg; }
  // Writes the register to `value`'s storage. may_alias: inputs whose storage `value`'s may be
  // (donated to it); the write then waits until the block has read them.
  void store(int reg, int32_t value, DType dtype, const std::vector<int32_t>& may_alias = {});
  // Full reduction (to a scalar) of the register over all n elements into `value`.
  void reduce(int reg, ir::ReduceKind kind, DType dtype, int32_t value);
  std::unique_ptr<Kernel> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tlaloc::runtime::host
