// The elementwise instruction loops (instr_loops.h) compiled for AVX-512 (F, VL, BW, DQ), chosen
// at run time by instr.cpp on CPUs that have it. As for AVX2, only the vector width changes: no
// FMA (none of these targets implies it), so every result is bitwise equal to the baseline's.
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
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq")
#define TLALOC_INSTR_ISA isa_avx512
#include "tlaloc/runtime/host/instr_loops.h"
#undef TLALOC_INSTR_ISA
#pragma GCC pop_options

#endif
