// Internal: the register program of a fused elementwise group (see elementwise.h), as recorded
// by ProgramBuilder over virtual registers, and its compilation into runnable instruction lists.
//
// A select whose predicate is one i1 value read from storage (found-inf skips, step == 0
// branches) picks the same operand for every element of a run. Such selects are resolved per
// run: the group is compiled once per combination of its predicates' values (at most
// kMaxPredicates of them), each variant with the select replaced by the chosen operand and the
// work only the other operand needed removed; the kernel reads the predicates and runs the
// matching variant. Every variant computes what the select would, so results are unchanged.
#pragma once

#include "tlaloc/runtime/host/instr.h"
#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::runtime::host {

inline constexpr int kMaxPredicates = 3;

enum class VKind : uint8_t { load, op, select, store, use, chain };

struct VInstr {
  explicit VInstr(VKind k, InstrFn f = nullptr) : kind(k), fn(f) {}
  VKind kind;
  InstrFn fn;                                // block loop (or the load / store / convert / round)
  InstrFn fn_sa = nullptr, fn_sb = nullptr;  // binary op with a / b one broadcast value
  ir::Op op = ir::Op::parameter;             // op: the IR op (for chaining), else parameter
  ir::Op inner = ir::Op::parameter;          // chain: op is outer(.., inner(a, b), ..)
  bool right = false;                        // chain: c is outer's left operand
  DType dtype = DType::f32;                  // op: operand dtype
  int dst = -1, a = -1, b = -1, c = -1;      // virtual registers
  int e = -1;                                // chain: broadcast register scaling c
  int32_t value = -1;                        // load / store: IR value whose storage is used
  int map = -1;                              // load: index of its LoadMap
  bool once = false;  // prologue: runs once per thread (scalar broadcasts and ops on them)
  bool plain = true;  // store: the dtype is stored as computed (not bf16 / f16)
  std::vector<int32_t> may_alias;  // store: inputs whose storage the value's may be (donation)
};

// Register slot bound straight to a value's storage for the current block.
struct Binding {
  int32_t slot, value;
  int64_t offset, elem;
};

// What ProgramBuilder recorded.
struct Recording {
  std::vector<VInstr> code;
  std::vector<int> vsize;         // element bytes of each virtual register
  std::vector<char> once;         // register holds one broadcast value (full block, set once)
  std::vector<char> from_op;      // register is an op's result
  std::vector<int32_t> input_of;  // value whose storage the register reads in place, or -1
  std::vector<int64_t> input_offset;
  std::vector<int> load_at;          // index in code of the once load that set the register, or -1
  std::vector<FusedReduce> reduces;  // slot: the virtual register reduced
  int nvregs() const { return int(vsize.size()); }
};

// One runnable program: registers are slots; slots [0, nscratch) are scratch blocks.
struct Program {
  int nscratch = 1, nslots = 1;
  std::vector<Instr> prologue, body;
  std::vector<Binding> bindings;
  std::vector<FusedReduce> reduces;
  // Inputs read in place by stores after the block that could not be ordered before the stores
  // overwriting them (a cycle): the kernel must not be given their storage to write in place.
  std::vector<int32_t> cyclic_inputs;
};

// The variant of `rec` in which the select predicates preds[k] (virtual registers of i1 once
// loads) hold bit k of `mask`. Removes dead instructions, lets an op write an output's storage
// directly when no later instruction reads storage that output may share (else stores it after
// the block), runs an arithmetic op whose result only feeds the next one in the same loop as it
// (chain_fn), folds a block-times-broadcast multiply that only feeds a chain's third operand
// into that chain, picks scalar-operand loops, and allocates slots by liveness.
Program compile_variant(const Recording& rec, const std::vector<LoadMap>& maps,
                        const std::vector<int>& preds, int mask);

}  // namespace tlaloc::runtime::host
