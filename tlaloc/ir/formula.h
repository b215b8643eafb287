// Dispatch from an op to its scalar formula (ops.def's last column, ir/scalar.h): what the host
// lane's loops and the reference evaluator both call, so they cannot disagree.
#pragma once

#include <type_traits>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/scalar.h"

namespace tlaloc::ir {

// A formula of one operand (F::f<T>(x)) rather than two (F::f<T>(a, b)).
template <class F>
inline constexpr bool kUnaryFormula = requires {
  F::template f<double>(1.0);
};

// Calls fn.template operator()<F>() with op's formula F and returns true; false (fn not called)
// for an op without one.
template <class Fn>
bool with_formula(Op op, Fn&& fn) {
  switch (op) {
#define TLALOC_OP(id, str, kind, operands, facts, formula)          \
  case Op::id:                                                      \
    if constexpr (!std::is_same_v<scalar::formula, scalar::None>) { \
      fn.template operator()<scalar::formula>();                    \
      return true;                                                  \
    }                                                               \
    return false;
#define TLALOC_COMPOSITE(id, str) \
  case Op::id:                    \
    return false;
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP
  }
  return false;
}

}  // namespace tlaloc::ir
