#include "tlaloc/ir/composite.h"

namespace tlaloc::ir {

const Composite& composite(Op op) {
  switch (op) {
#define TLALOC_OP(id, str, kind, operands, facts, formula)
#define TLALOC_COMPOSITE(id, str) \
  case Op::id:                    \
    return composite_##id();
#include "tlaloc/ir/ops.def"
#undef TLALOC_COMPOSITE
#undef TLALOC_OP
    default:
      fail("{} is not a composite op", op_name(op));
  }
}

size_t Composite::param(std::string_view p) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i] == p) return i;
  fail("{} has no attribute '{}'", name, p);
}

}  // namespace tlaloc::ir
