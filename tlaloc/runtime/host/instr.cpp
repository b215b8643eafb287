// Elementwise instruction kernels: one template per op, instantiated per compute type, for the
// baseline instruction set, for AVX2 (instr_avx2.cpp) and for AVX-512 (instr_avx512.cpp), the
// widest the CPU has chosen once per process (TLALOC_HOST_ISA=baseline or avx2 caps it). All
// compile the same IEEE operations (no FMA contraction), so results are bitwise equal.
// Semantics follow StableHLO (https://openxla.org/stablehlo/spec). Where StableHLO leaves a
// result implementation-defined we follow XLA's CPU backend:
//   integer x / 0 = -1 (s32) or all ones (u32); INT_MIN / -1 = INT_MIN;
//   integer x % 0 = x; INT_MIN % -1 = 0;
//   shift_left / shift_right_logical by >= 32 (amount read as unsigned) give 0;
//   float -> integer convert truncates toward zero, saturates at the type's limits, NaN -> 0;
//   convert to i1 is x != 0 (NaN -> 1); integer add / subtract / multiply / negate wrap.
// maximum / minimum propagate NaN and order -0 < +0; sign(+-0) = +-0, sign(NaN) = NaN.
#include "tlaloc/runtime/host/instr.h"

#include <array>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "tlaloc/core/error.h"
#include "tlaloc/ir/formula.h"

#define TLALOC_INSTR_ISA isa_baseline
#include "tlaloc/runtime/host/instr_loops.h"
#undef TLALOC_INSTR_ISA

namespace tlaloc::runtime::host {

#if TLALOC_HOST_AVX2
#define TLALOC_ISA_DECLS                                                                       \
  InstrFn load_fn(DType storage, int kind);                                                    \
  InstrFn store_fn(DType storage);                                                             \
  InstrFn round_fn(DType storage);                                                             \
  InstrFn op_fn(ir::Op op, DType dtype, ir::Comparison cmp, int scalar);                       \
  InstrFn select_scalar_fn(DType dtype);                                                       \
  InstrFn convert_fn(DType from, DType to);                                                    \
  InstrFn chain_fn(ir::Op inner, ir::Op outer, DType t, bool right, bool sa, bool sb, bool sc, \
                   bool scaled_c);
namespace isa_avx2 {
TLALOC_ISA_DECLS
}  // namespace isa_avx2
namespace isa_avx512 {
TLALOC_ISA_DECLS
}  // namespace isa_avx512
#undef TLALOC_ISA_DECLS
#endif
namespace isa_baseline {}  // namespace isa_baseline

Isa host_isa() {
#if TLALOC_HOST_AVX2
  static const Isa cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                                 __builtin_cpu_supports("avx512bw") &&
                                 __builtin_cpu_supports("avx512dq")
                             ? Isa::avx512
                         : __builtin_cpu_supports("avx2") ? Isa::avx2
                                                          : Isa::baseline;
  const char* e = std::getenv("TLALOC_HOST_ISA");
  if (e && std::string_view(e) == "baseline") return Isa::baseline;
  if (e && std::string_view(e) == "avx2" && cpu == Isa::avx512) return Isa::avx2;
  return cpu;
#else
  return Isa::baseline;
#endif
}

#if TLALOC_HOST_AVX2
#define TLALOC_DISPATCH(call)                   \
  (host_isa() == Isa::avx512 ? isa_avx512::call \
   : host_isa() == Isa::avx2 ? isa_avx2::call   \
                             : isa_baseline::call)
#else
#define TLALOC_DISPATCH(call) isa_baseline::call
#endif

DType compute_dtype(DType t) { return t == DType::bf16 || t == DType::f16 ? DType::f32 : t; }

InstrFn load_fn(DType storage, int kind) { return TLALOC_DISPATCH(load_fn(storage, kind)); }
InstrFn store_fn(DType storage) { return TLALOC_DISPATCH(store_fn(storage)); }
InstrFn round_fn(DType storage) { return TLALOC_DISPATCH(round_fn(storage)); }
InstrFn convert_fn(DType from, DType to) { return TLALOC_DISPATCH(convert_fn(from, to)); }
InstrFn select_scalar_fn(DType t) { return TLALOC_DISPATCH(select_scalar_fn(t)); }
InstrFn op_fn(ir::Op op, DType t, ir::Comparison cmp, int scalar) {
  return TLALOC_DISPATCH(op_fn(op, t, cmp, scalar));
}

InstrFn chain_fn(ir::Op inner, ir::Op outer, DType t, bool right, bool sa, bool sb, bool sc,
                 bool scaled_c) {
  return TLALOC_DISPATCH(chain_fn(inner, outer, t, right, sa, sb, sc, scaled_c));
}

}  // namespace tlaloc::runtime::host
