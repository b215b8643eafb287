// Internal: instructions of the elementwise register program (see elementwise.h).
#pragma once

#include <array>

#include "tlaloc/ir/ir.h"
#include "tlaloc/runtime/host/kernel.h"

// AVX2 builds of the instruction loops, dispatched at run time (GCC on x86-64).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TLALOC_HOST_AVX2 1
#else
#define TLALOC_HOST_AVX2 0
#endif

namespace tlaloc::runtime::host {

// The host lane's vector instruction set: the widest this CPU has, capped by TLALOC_HOST_ISA
// (baseline, avx2); read when a kernel is built. AVX-512 means F, VL, BW and DQ.
enum class Isa { baseline, avx2, avx512 };
Isa host_isa();

// A load's index map after collapsing: element i of the block starting at `base` reads
// storage offset + sum(coord[d] * strides[d]) where coord are the coordinates of base + i in
// `dims`. kind: 0 scalar fill, 1 contiguous, 2 general.
struct LoadMap {
  int kind = 1;
  int64_t offset = 0;
  std::vector<int64_t> dims, strides;
};

struct Instr;
// regs[r]: where register r's block lives (scratch, or storage bound for this block);
// ptr: the frame's value storage; the block is elements [base, base + len).
using InstrFn = void (*)(const Instr&, void* const* regs, void* const* ptr, int64_t base,
                         int64_t len);

struct Instr {
  InstrFn fn = nullptr;
  int32_t dst = -1, a = -1, b = -1, c = -1;  // registers
  int32_t e = -1;                            // chain: register scaling c (chain_fn scaled_c)
  int32_t value = -1;                        // load / store: IR value whose storage is used
  const LoadMap* map = nullptr;              // load
};

// Register r of the block, as T elements.
template <class T>
inline T* reg(void* const* regs, int32_t r) {
  return static_cast<T*>(regs[r]);
}

// Dtype registers compute in: f32 for f32 / bf16 / f16.
DType compute_dtype(DType t);

// Instruction functions, chosen once per node at compile time.
InstrFn load_fn(DType storage, int kind);
InstrFn store_fn(DType storage);
InstrFn round_fn(DType storage);  // nullptr unless bf16 / f16
// For an elementwise node (not convert) on operands of `dtype`. scalar: kScalarA / kScalarB when
// that operand register holds one broadcast value (binary ops and compare read it once per
// block; other ops ignore it and read the register's full block).
inline constexpr int kBlocks = 0, kScalarA = 1, kScalarB = 2;
InstrFn op_fn(ir::Op op, DType dtype, ir::Comparison cmp, int scalar = kBlocks);
// d = outer(c, inner(a, b)) (right) or outer(inner(a, b), c) in one loop, for inner / outer in
// add, subtract, multiply, divide on f32; sa / sb / sc: that operand is one broadcast value;
// scaled_c: c is multiply(c, e) with e one broadcast value (Instr::e), computed in the loop.
// nullptr when not available (then run the ops as separate instructions).
InstrFn chain_fn(ir::Op inner, ir::Op outer, DType dtype, bool right, bool sa, bool sb, bool sc,
                 bool scaled_c = false);
// select whose predicate register holds one broadcast value.
InstrFn select_scalar_fn(DType dtype);
// convert between dtypes (compute types); nullptr when it is a register alias.
InstrFn convert_fn(DType from, DType to);

}  // namespace tlaloc::runtime::host
