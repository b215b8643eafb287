// The elementwise instruction loops (instr_loops.h) compiled for AVX2, chosen at run time by
// instr.cpp on CPUs that have it. Only the vector width changes: no FMA, so every result is
// bitwise equal to the baseline loops'.
#include "tlaloc/runtime/host/instr.h"

#if TLALOC_HOST_AVX2

#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "tlaloc/core/error.h"
#include "tlaloc/ir/formula.h"

#pragma GCC push_options
#pragma GCC target("avx2")
#define TLALOC_INSTR_ISA isa_avx2
#include "tlaloc/runtime/host/instr_loops.h"
#undef TLALOC_INSTR_ISA
#pragma GCC pop_options

#endif
