#include "tlaloc/composites/composites.h"

namespace tlaloc::composites {

std::vector<Tensor> call(ir::Op op, const std::vector<Tensor>& operands,
                         std::vector<double> params) {
  if (operands.empty()) fail("{}: no operands", ir::op_name(op));
  ir::Builder& b = operands[0].builder();
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : operands) {
    if (&t.builder() != &b) fail("{}: operands from different captures", ir::op_name(op));
    ids.push_back(t.id());
  }
  std::vector<Tensor> out;
  for (ir::ValueId r : b.composite(op, std::move(ids), std::move(params))) out.emplace_back(&b, r);
  return out;
}

}  // namespace tlaloc::composites
